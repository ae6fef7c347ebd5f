//! An agent loop that compacts its history before every model call.
//!
//! Run: `cargo run --release --example agent_loop` (`--release` reuses the build of README's
//! first command). The "model" here is a stand-in that issues one tool call per turn; a real
//! agent would send `request` to its provider where the comment says so.

use compactor::OutcomePolicy;
use compactor::conversation::{
    Block, Message, Role, ToolInput, ToolResult, ToolResultContent, ToolUse,
};
use compactor::{Compactor, Format, config::Loader};
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    // One Compactor for the whole session: its token cache stays warm from turn to turn.
    let compactor = Compactor::from_config(Loader::default().load()?)?;
    let body: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/session.json"
    ))?)?;
    let mut history = Format::Anthropic.read(&body)?;
    let budget = Some(8_000);

    for turn in 0..10 {
        // Compact a copy for sending; the agent's own history is never changed.
        let out = compactor
            .compact(&history, Format::Anthropic, budget)
            .await?;
        let request = Format::Anthropic.write(&out.conversation);
        eprintln!("turn {turn}: {}", out.report.summary_line());
        let _ = request; // <- send `request` to the provider here

        // The model answered with a tool call; the tool ran; both go into the history.
        let id = format!("toolu_loop{turn}");
        history.messages.push(Message::new(
            Role::Assistant,
            vec![Block::ToolUse(ToolUse {
                id: id.clone(),
                name: "Read".into(),
                input: ToolInput::Json(
                    json!({ "file_path": format!("src/http/client_{turn}.rs") }),
                ),
                extra: Default::default(),
            })],
        ));
        let listing: String = (0..80)
            .map(|i| format!("{i:>4}\tlet setting_{i} = env::var(\"S{i}\")?;\n"))
            .collect();
        history.messages.push(Message::new(
            Role::User,
            // A result built by hand gets its outcome from the format's policy, as the
            // readers do (here: Anthropic, no `is_error` = success).
            vec![Block::ToolResult(OutcomePolicy::Anthropic.apply(
                ToolResult {
                    tool_use_id: id,
                    content: Some(ToolResultContent::Text(listing)),
                    is_error: None,
                    extra: Default::default(),
                    outcome: Default::default(),
                    rewritten: None,
                },
            ))],
        ));
    }
    Ok(())
}
