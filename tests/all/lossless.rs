//! Numbers pass through exactly: integers beyond 64 bits, long decimals and exponents in
//! unknown fields, tool inputs and unknown blocks come back as written, through reading and
//! writing each format and through a compaction that leaves them in place.

use compactor::config::Loader;
use compactor::format::{self, Format};
use compactor::{Compactor, Status};

/// Numbers serde_json without `arbitrary_precision` turns into a different number.
const NUMBERS: &str = r#"[123456789012345678901234567890, -98765432109876543210, 18446744073709551616,
    0.1000000000000000055511151231257827, 1e400, 1.0, 2.50, -0.0, 1E-7]"#;

fn anthropic_text() -> String {
    let long = "line of output ".repeat(400);
    format!(
        r#"{{"model": "m", "max_tokens": 1024, "x_trace": {{"id": 340282366920938463463374607431768211457, "n": {NUMBERS}}},
  "messages": [
    {{"role": "user", "content": "go"}},
    {{"role": "assistant", "content": [
      {{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {{"seed": 99999999999999999999999, "all": {NUMBERS}}}}},
      {{"type": "future_block", "payload": {{"big": 1234567890123456789012345}}}}
    ]}},
    {{"role": "user", "content": [{{"type": "tool_result", "tool_use_id": "toolu_1", "content": "{long}"}}]}},
    {{"role": "assistant", "content": [{{"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {{"v": 1.00000000000000000001}}}}]}},
    {{"role": "user", "content": [{{"type": "tool_result", "tool_use_id": "toolu_2", "content": "{long}"}}]}},
    {{"role": "assistant", "content": "ok"}},
    {{"role": "user", "content": "next"}}
  ]}}"#
    )
}

/// Every number of a JSON text as written (the independent oracle: a scan of the text).
fn numbers_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    let mut current = String::new();
    for c in text.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        if c.is_ascii_digit() || "+-.eE".contains(c) {
            current.push(c);
            continue;
        }
        if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        in_string = c == '"';
    }
    out.sort();
    out
}

/// The input's numbers as serde_json writes them back: digits and value exact, only the spelling
/// of an exponent normalized (`1E-7` -> `1e-7`, `1e400` -> `1e+400`).
fn normalized(numbers: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = numbers
        .into_iter()
        .map(|n| match n.split_once(['e', 'E']) {
            Some((m, e)) if e.starts_with(['+', '-']) => format!("{m}e{e}"),
            Some((m, e)) => format!("{m}e+{e}"),
            None => n,
        })
        .collect();
    out.sort();
    out
}

#[test]
fn numbers_round_trip_exactly_through_every_format_reader_and_writer() {
    let text = anthropic_text();
    let loaded = format::load(text.as_bytes(), None, Default::default()).unwrap();
    assert_eq!(loaded.format, Format::Anthropic);
    let written = serde_json::to_string(&Format::Anthropic.write(&loaded.conversation)).unwrap();
    assert_eq!(numbers_in(&written), normalized(numbers_in(&text)));
    assert!(written.contains("340282366920938463463374607431768211457"));
    assert!(written.contains("0.1000000000000000055511151231257827"));
    // The same tool inputs and extra fields as an OpenAI Chat body (arguments are a JSON
    // string there) and back: the numbers in the arguments are still exact.
    let chat = format::convert(&loaded.conversation, Format::Anthropic, Format::OpenAiChat);
    let chat_text = serde_json::to_string(&Format::OpenAiChat.write(&chat)).unwrap();
    let read_back = format::load(
        chat_text.as_bytes(),
        Some(Format::OpenAiChat),
        Default::default(),
    )
    .unwrap();
    let again = serde_json::to_string(&Format::OpenAiChat.write(&read_back.conversation)).unwrap();
    assert_eq!(again, chat_text);
    assert!(chat_text.contains("99999999999999999999999"));
}

#[tokio::test]
async fn a_compaction_keeps_the_numbers_of_what_it_keeps() {
    let text = anthropic_text();
    let loaded = format::load(text.as_bytes(), None, Default::default()).unwrap();
    let mut settings = Loader {
        preset: Some("microcompact".into()),
        env: false,
        ..Loader::default()
    }
    .load()
    .unwrap();
    settings.microcompact.keep_recent = 0;
    settings.microcompact.clear_at_least = 0;
    settings.microcompact.clear_tool_inputs = false;
    let engine = Compactor::from_config(settings).unwrap();
    let out = engine
        .compact(&loaded.conversation, Format::Anthropic, Some(1_000))
        .await
        .unwrap();
    assert_ne!(out.report.status, Status::Unchanged, "{:?}", out.report);
    let written = serde_json::to_string(&Format::Anthropic.write(&out.conversation)).unwrap();
    // Clearing replaced the long results (no numbers in them); every number is still there,
    // as written (a placeholder may add numbers of its own).
    let mut got = numbers_in(&written);
    for n in normalized(numbers_in(&text)) {
        let at = got.iter().position(|g| *g == n);
        assert!(at.is_some(), "{n} lost or changed in {written}");
        got.remove(at.unwrap());
    }
}
