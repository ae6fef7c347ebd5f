//! Property: arbitrary Unicode text (astral, combining, right-to-left, arrows, curly quotes, and
//! multi-byte characters right before the markers the outcome scanners look for: `exit code`,
//! `Exit code:`, `<returncode>`, `[…`) in tool results, tool inputs and texts never makes a
//! strategy panic, and every preset returns a request the guard accepts.

use crate::support::runtime;
use compactor::config::Loader;
use compactor::format::Format;
use compactor::guard::{self, ValidateOptions};
use compactor::{Compactor, Conversation};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::sync::OnceLock;

const PRESETS: [&str; 3] = ["default", "truncate", "microcompact"];

fn engines() -> &'static Vec<Compactor> {
    static ENGINES: OnceLock<Vec<Compactor>> = OnceLock::new();
    ENGINES.get_or_init(|| {
        PRESETS
            .iter()
            .map(|p| {
                let mut s = Loader {
                    preset: Some(p.to_string()),
                    env: false,
                    ..Loader::default()
                }
                .load()
                .unwrap();
                s.policy.remember = false;
                Compactor::from_config(s).unwrap()
            })
            .collect()
    })
}

/// Characters that are more than one byte in UTF-8, or that change how text is laid out.
const AWKWARD: &[&str] = &[
    "→",
    "“",
    "”",
    "‘",
    "’",
    "É",
    "é",
    "e\u{301}",
    "\u{0627}\u{0644}",
    "\u{202e}",
    "\u{200d}",
    "😀",
    "𝔘",
    "\u{1f3f3}\u{fe0f}\u{200d}\u{1f308}",
    "…",
    "ß",
    "中",
    "\u{feff}",
];

/// What the outcome scanners look for (exit codes, return codes, truncation markers).
const MARKERS: &[&str] = &[
    "exit code",
    "Exit code:",
    "exit code: 2",
    "exit 0",
    "exit status 1",
    "<returncode>",
    "<returncode>1</returncode>",
    "[…",
    "[… 12 tokens truncated …]",
    "Error:",
    "error",
    "\n",
];

/// A piece of text: arbitrary Unicode, an awkward character, or an awkward character glued in
/// front of a marker (`É` + `exit code`, `2→` + `exit 0`).
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        proptest::sample::select(AWKWARD).prop_map(str::to_string),
        (
            proptest::sample::select(AWKWARD),
            proptest::sample::select(MARKERS),
            "[0-9]{0,3}",
        )
            .prop_map(|(a, m, n)| format!("{a}{m}{n}")),
        ("[0-9]{1,2}", proptest::sample::select(MARKERS)).prop_map(|(n, m)| format!("{n}→{m}")),
    ]
}

fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(piece(), 1..12).prop_map(|parts| parts.concat())
}

/// An Anthropic body: a user request, then `n` tool rounds whose inputs, results and
/// assistant texts are arbitrary text repeated `scale` times, then a closing user turn.
fn body(texts: &[String], scale: usize, errors: &[bool]) -> Value {
    let mut messages = vec![json!({"role": "user", "content": texts[0].clone() + " do it"})];
    for (i, t) in texts.iter().enumerate().skip(1) {
        let id = format!("toolu_{i}");
        let long = vec![t.as_str(); scale].join("\n");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("step {i}: {t}")},
            {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": t}}
        ]}));
        let mut result = json!({"type": "tool_result", "tool_use_id": id, "content": long});
        if errors[i % errors.len()] {
            result["is_error"] = Value::Bool(true);
        }
        messages.push(json!({"role": "user", "content": [result]}));
    }
    messages.push(json!({"role": "assistant", "content": "done"}));
    messages.push(json!({"role": "user", "content": "next"}));
    json!({"model": "m", "max_tokens": 64, "messages": messages})
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_unicode_never_panics_and_every_preset_stays_valid(
        texts in proptest::collection::vec(text(), 2..7),
        scale in 1usize..40,
        errors in proptest::collection::vec(any::<bool>(), 1..4),
        budget in 60usize..2_000,
    ) {
        let value = body(&texts, scale, &errors);
        let input: Conversation = Format::Anthropic.read(&value).unwrap();
        for (engine, preset) in engines().iter().zip(PRESETS) {
            let out = runtime()
                .block_on(engine.compact(&input, Format::Anthropic, Some(budget)))
                .unwrap();
            let violations = guard::validate(
                &out.conversation,
                Format::Anthropic,
                ValidateOptions { allow_open_tail: false },
            );
            prop_assert!(violations.is_empty(), "{preset}: {violations:?}");
            // The output is a request body that serializes and reads back as the same history.
            let written = Format::Anthropic.write(&out.conversation);
            let again = Format::Anthropic.read(&written).unwrap();
            prop_assert_eq!(Format::Anthropic.write(&again), written);
        }
    }
}
