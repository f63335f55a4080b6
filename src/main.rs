//! `ringlog`: the command line. A thin shell: every subcommand parses its arguments and calls
//! into `ringlog-net` (node, clients) or `ringlog-engine` (files); no logic of its own lives here.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ringlog_net::config::NodeConfig;
use ringlog_net::meta_properties::{self, MetaProperties};

#[derive(Parser)]
#[command(
    name = "ringlog",
    version,
    about = "A KRaft-style replicated, snapshotted log on io_uring"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Stamp a node's data folder with meta.properties (like kafka-storage format).
    Format {
        /// The node's properties file (node.id and metadata.log.dir are taken from it).
        #[arg(long)]
        config: PathBuf,
        /// The cluster id (22 characters of base64url); a new random one when omitted.
        #[arg(long)]
        cluster_id: Option<String>,
    },
    /// Print a new random cluster id (like kafka-storage random-uuid).
    RandomUuid,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("ringlog: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Format { config, cluster_id } => {
            let config = NodeConfig::load(&config).map_err(|error| error.to_string())?;
            let cluster_id = match cluster_id {
                Some(id) => id,
                None => meta_properties::random_cluster_id().map_err(|error| error.to_string())?,
            };
            let meta = MetaProperties {
                cluster_id,
                node_id: config.node_id,
            };
            MetaProperties::format(&config.metadata_log_dir, &meta)
                .map_err(|error| error.to_string())?;
            println!(
                "Formatted {} for node {} in cluster {}",
                config.metadata_log_dir.display(),
                meta.node_id,
                meta.cluster_id
            );
            Ok(())
        }
        Command::RandomUuid => {
            println!(
                "{}",
                meta_properties::random_cluster_id().map_err(|error| error.to_string())?
            );
            Ok(())
        }
    }
}
