//! The integration tests: one binary, one module per area.
#[path = "all/agreement.rs"]
mod agreement;
#[path = "all/compaction.rs"]
mod compaction;
#[path = "all/corpus.rs"]
mod corpus;
