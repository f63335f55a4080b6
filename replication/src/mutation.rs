//! Deliberate rule breakers for the simulator's mutation check (docs/simulator.md).
//!
//! The enum always exists so the core can name a rule at the place it is enforced, but a
//! mutation can only be switched on through `QuorumConfig::mutation`, which exists only with
//! the `sim` feature: a production build cannot break a rule by configuration.

/// One safety rule to break on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// A voter grants every vote request whose log is up to date, even after voting for
    /// someone else in the same epoch.
    DoubleVote,
    /// The leader advances the high-watermark to the largest end offset any voter reports
    /// instead of the majority's.
    HighWatermarkWithoutMajority,
    /// The leader advances the high-watermark before a record of its own epoch is committed.
    SkipOwnEpochCommitRule,
    /// A follower told to truncate drops one batch below its high-watermark as well.
    TruncateBelowHighWatermark,
    /// KIP-630: a leader moves its log start to its high-watermark, past its latest snapshot,
    /// so the log starts where no snapshot is.
    LogStartWithoutSnapshot,
    /// KIP-595 reassignment: the leader appends a new voter change while the previous one is
    /// not committed yet (two changes in flight).
    SecondVoterChangeInFlight,
    /// KIP-595 reassignment: replicas act on a voter set only once it is committed, instead of
    /// as soon as it is appended.
    ActOnCommittedVoterSet,
    /// KIP-853: a replica whose disk was replaced answers a Vote (or pre-vote) meant for the
    /// voter on its old disk as that voter, so the candidate counts the new disk's vote as the
    /// old voter's (`isValidVoterKey` skipped).
    VoteIgnoresDirectoryId,
    /// A follower fetches ahead of its flush even when the records it holds are not yet
    /// committed, so the leader counts unsynced offsets toward the high-watermark.
    FetchAheadOfUncommittedFlush,
}

impl Mutation {
    pub const ALL: [Mutation; 9] = [
        Mutation::DoubleVote,
        Mutation::HighWatermarkWithoutMajority,
        Mutation::SkipOwnEpochCommitRule,
        Mutation::TruncateBelowHighWatermark,
        Mutation::LogStartWithoutSnapshot,
        Mutation::SecondVoterChangeInFlight,
        Mutation::ActOnCommittedVoterSet,
        Mutation::VoteIgnoresDirectoryId,
        Mutation::FetchAheadOfUncommittedFlush,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mutation::DoubleVote => "double-vote",
            Mutation::HighWatermarkWithoutMajority => "hw-without-majority",
            Mutation::SkipOwnEpochCommitRule => "skip-own-epoch-commit",
            Mutation::TruncateBelowHighWatermark => "truncate-below-hw",
            Mutation::LogStartWithoutSnapshot => "log-start-without-snapshot",
            Mutation::SecondVoterChangeInFlight => "second-voter-change-in-flight",
            Mutation::ActOnCommittedVoterSet => "act-on-committed-voter-set",
            Mutation::VoteIgnoresDirectoryId => "vote-ignores-directory-id",
            Mutation::FetchAheadOfUncommittedFlush => "fetch-ahead-of-uncommitted-flush",
        }
    }

    pub fn from_name(name: &str) -> Option<Mutation> {
        Mutation::ALL.into_iter().find(|m| m.name() == name)
    }
}
