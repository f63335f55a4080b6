//! A properties file read into the documented keys: aliases resolved, unknown and twice-set
//! keys refused by name, defaults filled in ([`KEYS`]), and typed reads that name the key in
//! their errors.

use std::collections::BTreeMap;

use super::{ConfigError, KEYS, ResolvedProperty};

/// The raw key=value pairs of a file, keyed by the documented name (aliases resolved).
pub(super) struct Properties {
    origin: String,
    values: BTreeMap<&'static str, String>,
    /// The keys the text set (under their name or an alias).
    from_file: std::collections::BTreeSet<&'static str>,
}

impl Properties {
    pub(super) fn parse(origin: &str, text: &str) -> Result<Properties, ConfigError> {
        let mut values: BTreeMap<&'static str, String> = BTreeMap::new();
        let mut spelled: BTreeMap<&'static str, String> = BTreeMap::new();
        for (index, raw_line) in text.lines().enumerate() {
            let line = raw_line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let Some(split_at) = line.find(['=', ':']) else {
                return Err(ConfigError::Syntax {
                    path: origin.into(),
                    line: index + 1,
                    text: line.into(),
                });
            };
            let key = line[..split_at].trim();
            let value = line[split_at + 1..].trim();
            let Some(definition) = KEYS
                .iter()
                .find(|definition| definition.name == key || definition.aliases.contains(&key))
            else {
                return Err(ConfigError::UnknownKey {
                    path: origin.into(),
                    line: index + 1,
                    key: key.into(),
                });
            };
            if let Some(other) = spelled.insert(definition.name, key.to_string()) {
                return Err(ConfigError::Duplicate {
                    path: origin.into(),
                    key: key.into(),
                    other,
                });
            }
            values.insert(definition.name, value.to_string());
        }
        for definition in KEYS {
            if let Some(default) = definition.default {
                values
                    .entry(definition.name)
                    .or_insert_with(|| default.to_string());
            }
        }
        Ok(Properties {
            origin: origin.into(),
            values,
            from_file: spelled.into_keys().collect(),
        })
    }

    /// Every declared key with its value and whether the text set it.
    pub(super) fn resolved(&self) -> Vec<ResolvedProperty> {
        KEYS.iter()
            .map(|definition| ResolvedProperty {
                name: definition.name,
                value: self.values.get(definition.name).cloned(),
                from_file: self.from_file.contains(definition.name),
            })
            .collect()
    }

    /// Whether the text set `key` (rather than its default).
    pub(super) fn set_in_file(&self, key: &'static str) -> bool {
        self.from_file.contains(key)
    }

    pub(super) fn get(&self, key: &'static str) -> &str {
        debug_assert!(
            KEYS.iter().any(|definition| definition.name == key),
            "undeclared key {key}"
        );
        self.values.get(key).map(String::as_str).unwrap_or("")
    }

    pub(super) fn required(&self, key: &'static str) -> Result<&str, ConfigError> {
        match self.values.get(key) {
            Some(value) if !value.is_empty() => Ok(value),
            _ => Err(ConfigError::Missing {
                path: self.origin.clone(),
                key,
            }),
        }
    }

    pub(super) fn number<T: std::str::FromStr>(&self, key: &'static str) -> Result<T, ConfigError> {
        let text = self.required(key)?;
        text.parse()
            .map_err(|_| self.invalid(key, "expected a number".into()))
    }

    pub(super) fn positive<T: std::str::FromStr + Default + PartialOrd>(
        &self,
        key: &'static str,
    ) -> Result<T, ConfigError> {
        let value: T = self.number(key)?;
        if value <= T::default() {
            return Err(self.invalid(key, "must be greater than zero".into()));
        }
        Ok(value)
    }

    pub(super) fn boolean(&self, key: &'static str) -> Result<bool, ConfigError> {
        match self.required(key)? {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(self.invalid(key, "expected true or false".into())),
        }
    }

    pub(super) fn invalid(&self, key: &'static str, reason: String) -> ConfigError {
        ConfigError::Invalid {
            path: self.origin.clone(),
            key,
            value: self.get(key).to_string(),
            reason,
        }
    }
}
