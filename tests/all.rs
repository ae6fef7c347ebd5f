//! The integration tests: one binary, one module per area.
// A failed unwrap in a test is a failed test, with its location: the idiom here.
// Byte offsets into the tests' own texts come from find(): slicing by them is the idiom here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::string_slice)]
#[path = "all/ab.rs"]
mod ab;
#[path = "all/agreement.rs"]
mod agreement;
#[path = "all/budgets.rs"]
mod budgets;
#[path = "all/cli.rs"]
mod cli;
#[path = "all/cli_choices.rs"]
mod cli_choices;
#[path = "all/compaction.rs"]
mod compaction;
#[path = "all/conformance.rs"]
mod conformance;
#[path = "all/corpus.rs"]
mod corpus;
#[path = "all/gemini_shapes.rs"]
mod gemini_shapes;
#[path = "all/guard_props.rs"]
mod guard_props;
#[path = "all/images.rs"]
mod images;
#[path = "all/limits.rs"]
mod limits;
#[path = "all/lossless.rs"]
mod lossless;
#[path = "all/model_count.rs"]
mod model_count;
#[path = "all/open_world_props.rs"]
mod open_world_props;
#[path = "all/openai_shapes.rs"]
mod openai_shapes;
#[path = "all/outcomes.rs"]
mod outcomes;
#[path = "all/placeholders.rs"]
mod placeholders;
#[path = "all/proxy_surface.rs"]
mod proxy_surface;
#[path = "all/readme.rs"]
mod readme;
#[path = "all/recall.rs"]
mod recall;
#[path = "all/server.rs"]
mod server;
#[path = "all/service_says.rs"]
mod service_says;
#[path = "all/store.rs"]
mod store;
#[path = "all/strategy_props.rs"]
mod strategy_props;
#[path = "all/summary.rs"]
mod summary;
#[path = "all/support/mod.rs"]
mod support;
#[path = "all/tenancy.rs"]
mod tenancy;
#[path = "all/tokens_oracle.rs"]
mod tokens_oracle;
#[path = "all/unicode_props.rs"]
mod unicode_props;
