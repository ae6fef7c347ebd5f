use super::*;
use crate::conversation::{
    Block, Message, Role, ToolInput, ToolResult, ToolResultContent, ToolUse,
};
use crate::strategy::MARKER_PREFIX;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::collections::HashMap;

fn call(id: &str, name: &str, input: Value) -> Block {
    Block::ToolUse(ToolUse {
        id: id.into(),
        name: name.into(),
        input: ToolInput::Json(input),
        extra: Default::default(),
    })
}

fn result(id: &str, text: &str, is_error: Option<bool>) -> Block {
    Block::ToolResult(crate::outcome::OutcomePolicy::Anthropic.apply(ToolResult {
        tool_use_id: id.into(),
        content: Some(ToolResultContent::Text(text.into())),
        is_error,
        extra: Default::default(),
        outcome: Default::default(),
        rewritten: None,
    }))
}

fn conv(messages: Vec<Message>) -> Conversation {
    Conversation {
        messages,
        ..Default::default()
    }
}

/// A small Anthropic-style session with one of everything.
fn session() -> Conversation {
    conv(vec![
        Message::text(
            Role::User,
            "Fix the login bug from #42 in src/auth.rs. You must keep the API stable. \
             Thanks!\nNever push to main.",
        ),
        Message::new(
            Role::Assistant,
            vec![
                Block::text("Looking at https://example.com/docs and version 1.2.3 now."),
                call("t1", "Read", json!({"file_path": "src/auth.rs"})),
                call("t2", "Bash", json!({"command": "cargo test"})),
            ],
        ),
        Message::new(
            Role::User,
            vec![
                result("t1", "fn login() {}", None),
                result("t2", "3 tests failed", Some(true)),
            ],
        ),
        Message::new(
            Role::Assistant,
            vec![call(
                "t3",
                "apply_patch",
                json!({"input": "*** Begin Patch\n*** Update File: src/auth.rs\n*** Add File: tests/login.rs\n*** End Patch"}),
            )],
        ),
        Message::new(Role::User, vec![result("t3", "Done", None)]),
        Message::text(Role::User, "Now commit it as deadbeef1 on v0.15, please."),
    ])
}

#[test]
fn paths_come_from_path_keys_and_patch_headers() {
    assert_eq!(
        paths(&session()),
        vec!["src/auth.rs".to_string(), "tests/login.rs".to_string()]
    );
}

#[test]
fn commands_carry_their_outcome() {
    let mut c = session();
    c.messages[1].content.push(call(
        "t4",
        "shell",
        json!({"command": ["bash", "-lc", "rg login"]}),
    ));
    assert_eq!(
        commands(&c),
        vec![
            CommandRun {
                id: "t2".into(),
                command: "cargo test".into(),
                outcome: "error"
            },
            CommandRun {
                id: "t4".into(),
                command: "rg login".into(),
                outcome: "no result"
            },
        ]
    );
}

#[test]
fn failed_calls_are_the_error_results() {
    assert_eq!(failed_calls(&session()), vec!["t2".to_string()]);
}

#[test]
fn instructions_are_user_sentences_with_a_constraint_word() {
    assert_eq!(
        instructions(&session()),
        vec![
            "You must keep the API stable.".to_string(),
            "Never push to main.".to_string(),
        ]
    );
}

#[test]
fn a_multi_line_user_item_is_the_users_on_every_line() {
    let full = session();
    let p = Probes::of(&full);
    let told = |text: &str| {
        let s = p.survival(&conv(vec![Message::text(Role::User, text)]));
        s.into_iter()
            .find(|x| x.probe == "instructions")
            .map(|x| x.kept)
    };
    // The session state writes a long request as one item, later lines indented; a line
    // of the request ending with `:` is not a heading that takes the attribution away.
    let item = "The user's words, verbatim, oldest first:\n[user] #1: Fix the login bug.\n  \
                Steps:\n  You must keep the API stable.\n  Never push to main.";
    assert_eq!(told(item), Some(2));
    // The same lines unindented under a heading that is not the user's tell nothing.
    let loose = "Notes:\nSteps:\nYou must keep the API stable.\nNever push to main.";
    assert_eq!(told(loose), Some(0));
}

#[test]
fn only_counts_as_a_whole_word() {
    let c = conv(vec![Message::new(
        Role::User,
        vec![
            Block::text("Use the only flag. Read the onlyfans docs."),
            Block::text("<system-reminder>You must never mind.</system-reminder>"),
        ],
    )]);
    assert_eq!(instructions(&c), vec!["Use the only flag.".to_string()]);
}

#[test]
fn identifiers_cover_urls_versions_issues_hashes_and_paths() {
    assert_eq!(
        identifiers(&session()),
        vec![
            "#42",
            "src/auth.rs",
            "https://example.com/docs",
            "1.2.3",
            "deadbeef1",
            "v0.15",
        ]
    );
}

#[test]
fn last_request_is_the_last_text_a_user_wrote() {
    assert_eq!(
        last_request(&session()).as_deref(),
        Some("Now commit it as deadbeef1 on v0.15, please.")
    );
}

#[test]
fn everything_survives_in_the_original() {
    let c = session();
    let p = Probes::of(&c);
    let s = p.survival(&c);
    assert!(s.iter().all(|x| x.kept == x.total), "{s:?}");
    assert_eq!(fidelity(&s), Some(1.0));
}

#[test]
fn a_digest_keeps_what_it_names_and_loses_the_rest() {
    let c = session();
    let p = Probes::of(&c);
    // The first four messages replaced by a digest that names the failure and one path.
    let digest = format!(
        "{MARKER_PREFIX}\n[user] Fix the login bug from #42 in src/auth.rs.\n\
         [call t2 Bash(cargo   test)]\n[result t2 (error): 3 tests failed]"
    );
    let mut out = conv(vec![Message::text(Role::User, digest)]);
    out.messages.extend(c.messages[4..].iter().cloned());
    out.messages.remove(1); // t3's result goes with its call
    let s = p.survival(&out);
    let cells: Vec<(&str, String)> = s.iter().map(|x| (x.probe, x.cell())).collect();
    assert_eq!(
        cells,
        vec![
            // Named in the user's words, not as a file a call touched.
            ("paths", "0/2".to_string()),
            ("edited", "0/2".to_string()),
            // Named without its outcome: not kept.
            ("commands", "0/1".to_string()),
            ("failed_calls", "1/1".to_string()),
            ("fixes", "-".to_string()),
            // The first request lost its constraints; the last is kept.
            ("user_messages", "1/2".to_string()),
            ("instructions", "0/2".to_string()),
            ("identifiers", "4/6".to_string()),
            ("last_request", "1/1".to_string()),
        ]
    );
    assert_eq!(s[3].how_cell(), "1 line");
    assert_eq!(s[5].how_cell(), "1 kept");
    let f = fidelity(&s).unwrap();
    assert!((f - (0.0 + 0.0 + 0.0 + 1.0 + 0.5 + 0.0 + 4.0 / 6.0 + 1.0) / 8.0).abs() < 1e-12);
}

#[test]
fn bare_ids_and_denied_failures_do_not_count() {
    let c = session();
    let p = Probes::of(&c);
    // Eight lines naming ids with "no errors": a list of bare ids, no cause, no outcome.
    let ids: String = ["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8"]
        .iter()
        .map(|i| format!("[result {i}: passed, no errors]\n"))
        .collect();
    let out = conv(vec![Message::text(Role::User, ids)]);
    let s = p.survival(&out);
    let f = fidelity(&s).unwrap();
    assert!(f < 0.3, "{s:?}");
    let by: HashMap<&str, usize> = s.iter().map(|x| (x.probe, x.kept)).collect();
    assert_eq!((by["failed_calls"], by["commands"]), (0, 0));
}

#[test]
fn a_command_counts_only_with_its_outcome_and_a_failure_with_its_cause() {
    let c = session();
    let p = Probes::of(&c);
    let cells = |text: &str| -> (String, String) {
        let out = conv(vec![Message::text(Role::User, text)]);
        let s = p.survival(&out);
        (s[2].cell(), s[3].cell())
    };
    assert_eq!(cells("ran cargo test"), ("0/1".into(), "0/1".into()));
    assert_eq!(cells("t2 failed"), ("0/1".into(), "0/1".into()));
    assert_eq!(
        cells("[failed t2] Bash, command cargo test: error: 3 tests failed"),
        ("1/1".into(), "1/1".into())
    );
}

#[test]
fn an_edited_file_counts_only_as_edited() {
    let c = session();
    let p = Probes::of(&c);
    assert_eq!(
        p.edited,
        vec!["src/auth.rs".to_string(), "tests/login.rs".to_string()]
    );
    let edited = |text: &str| -> String {
        let out = conv(vec![Message::text(Role::User, text)]);
        p.survival(&out)[1].cell()
    };
    assert_eq!(edited("src/auth.rs\ntests/login.rs"), "0/2");
    assert_eq!(edited("[read] src/auth.rs, tests/login.rs"), "0/2");
    assert_eq!(
        edited("[edited] src/auth.rs\n[created] tests/login.rs"),
        "2/2"
    );
    // A path is not its own context: `new` in a file name says nothing.
    assert_eq!(edited("tests/new/login.rs"), "0/2");
    // Under a heading that says what was done.
    assert_eq!(edited("Files modified:\n- auth.rs\n- login.rs"), "2/2");
}

#[test]
fn a_failure_told_without_its_later_fix_is_stale() {
    let mut c = session();
    c.messages.push(Message::new(
        Role::Assistant,
        vec![call("t5", "Bash", json!({"command": "cargo test"}))],
    ));
    c.messages
        .push(Message::new(Role::User, vec![result("t5", "ok", None)]));
    let p = Probes::of(&c);
    assert_eq!(
        p.fixes,
        vec![FixRun {
            failed: "t2".into(),
            first_line: "3 tests failed".into(),
            fixed_by: "t5".into()
        }]
    );
    let fixes = |text: &str| -> Survival {
        let out = conv(vec![Message::text(Role::User, text)]);
        p.survival(&out).swap_remove(4)
    };
    let stale = fixes("[failed t2] Bash, command cargo test: error: 3 tests failed");
    assert_eq!(
        (stale.cell(), stale.how_cell()),
        ("0/1".into(), "1 stale".into())
    );
    let told = fixes("[failed t2] Bash: error: 3 tests failed -> fixed by t5 at message 6");
    assert_eq!(
        (told.cell(), told.how_cell()),
        ("1/1".into(), "1 line".into())
    );
    // Not told at all: neither kept nor stale.
    assert_eq!(fixes("nothing").how_cell(), "");
}

#[test]
fn user_words_count_when_attributed_to_the_user() {
    let c = session();
    let p = Probes::of(&c);
    let last = "Now commit it as deadbeef1 on v0.15, please.";
    let user = |text: &str| -> (String, String) {
        let out = conv(vec![Message::text(Role::Assistant, text)]);
        let s = p.survival(&out);
        (s[5].cell(), s[8].cell())
    };
    assert_eq!(user(last), ("0/2".into(), "0/1".into()));
    assert_eq!(
        user(&format!("[user] #2: {last}")),
        ("1/2".into(), "1/1".into())
    );
    assert_eq!(
        user(&format!("All user messages:\n- {last}")),
        ("1/2".into(), "1/1".into())
    );
    // Shortened around its constraints: first sentence, constraint sentences, last.
    let first = &p.user_messages[0];
    let short = around_constraints(first);
    assert_ne!(&short, first);
    assert_eq!(user(&format!("[user] #1: {short}")).0, "1/2");
}

#[test]
fn identifiers_leave_out_closing_tags_and_slash_joined_words() {
    let c = conv(vec![Message::new(
        Role::Assistant,
        vec![Block::text(
            "<summary>read/write and/or lib/spotter</summary> see /usr/lib and ./run/x and a/b.rs",
        )],
    )]);
    assert_eq!(identifiers(&c), vec!["/usr/lib", "./run/x", "a/b.rs"]);
}
