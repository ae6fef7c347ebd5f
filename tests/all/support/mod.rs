//! Test helpers shared by the integration-test modules.
pub mod fake_llm;
