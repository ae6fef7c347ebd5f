use super::test_blocks::{call, result};
use super::*;
use crate::conversation::{Block, Message, Role};
use pretty_assertions::assert_eq;
use serde_json::json;

fn session() -> Vec<Message> {
    vec![
        Message::text(
            Role::User,
            "<system-reminder>x</system-reminder>Fix the build.",
        ),
        Message::new(
            Role::Assistant,
            vec![
                call("t1", "Read", json!({"file_path": "/p/src/a.rs"})),
                call("t2", "Bash", json!({"command": "cargo build"})),
            ],
        ),
        Message::new(
            Role::User,
            vec![
                result("t1", "fn a() {}", false),
                result(
                    "t2",
                    "Exit code 101\nerror[E0425]: cannot find `b`\n\nerror: could not compile",
                    true,
                ),
            ],
        ),
        Message::new(
            Role::Assistant,
            vec![
                call(
                    "t3",
                    "Edit",
                    json!({"file_path": "/p/src/a.rs", "old_string": "a", "new_string": "b"}),
                ),
                call(
                    "t4",
                    "Write",
                    json!({"file_path": "/p/src/new.rs", "content": "x"}),
                ),
            ],
        ),
        Message::new(
            Role::User,
            vec![
                result("t3", "The file /p/src/a.rs has been updated.", false),
                result("t4", "File created successfully at: /p/src/new.rs", false),
            ],
        ),
        Message::new(
            Role::Assistant,
            vec![call("t5", "Bash", json!({"command": "cargo build"}))],
        ),
        Message::new(Role::User, vec![result("t5", "Finished", false)]),
    ]
}

proptest::proptest! {
    /// A failure's fix is the first later call of the same tool with the same input that
    /// succeeded (counted here call by call), whatever other tools and inputs come between.
    #[test]
    fn a_fix_is_the_first_later_identical_success(
        calls in proptest::collection::vec((0usize..3, 0usize..3, proptest::bool::ANY), 0..24)
    ) {
        let tools = ["Bash", "Grep", "Read"];
        let mut msgs = Vec::new();
        for (k, (tool, input, failed)) in calls.iter().enumerate() {
            let id = format!("c{k}");
            msgs.push(Message::new(Role::Assistant, vec![call(&id, tools[*tool], json!({"command": format!("x{input}")}))]));
            msgs.push(Message::new(Role::User, vec![result(&id, "error: no", *failed)]));
        }
        let f = Facts::of(&msgs);
        let failed: Vec<usize> = (0..calls.len()).filter(|&k| calls[k].2).collect();
        proptest::prop_assert_eq!(f.failures.len(), failed.len());
        for (fl, &k) in f.failures.iter().zip(&failed) {
            let want = (k + 1..calls.len())
                .find(|&j| !calls[j].2 && calls[j].0 == calls[k].0 && calls[j].1 == calls[k].1)
                .map(|j| Fix { id: format!("c{j}"), message: 2 * j });
            proptest::prop_assert_eq!(&fl.fixed_by, &want, "call {}", k);
        }
    }
}

#[test]
fn a_failure_has_its_cause_and_its_fix() {
    let f = Facts::of(&session());
    assert_eq!(
        f.failures,
        vec![FailureFact {
            call: 1,
            first_line: "error[E0425]: cannot find `b`".into(),
            last_line: Some("error: could not compile".into()),
            fixed_by: Some(Fix {
                id: "t5".into(),
                message: 5
            }),
        }]
    );
    assert_eq!(f.calls[1].command.as_deref(), Some("cargo build"));
    assert_eq!(f.calls[1].outcome, Some(Outcome::Error));
}

#[test]
fn files_carry_what_was_done_to_them() {
    let f = Facts::of(&session());
    let got: Vec<(&str, FileAction)> = f
        .touches
        .iter()
        .map(|t| (t.path.as_str(), t.action))
        .collect();
    assert_eq!(
        got,
        vec![
            ("/p/src/a.rs", FileAction::Read),
            ("/p/src/a.rs", FileAction::Edited),
            ("/p/src/new.rs", FileAction::Created),
        ]
    );
}

#[test]
fn user_words_leave_out_the_harness() {
    let f = Facts::of(&session());
    assert_eq!(
        f.user,
        vec![UserFact {
            message: 0,
            text: "Fix the build.".into()
        }]
    );
}

#[test]
fn a_failed_edit_touches_nothing_and_rm_deletes() {
    let msgs = vec![
        Message::new(
            Role::Assistant,
            vec![
                call(
                    "e1",
                    "Edit",
                    json!({"file_path": "a.rs", "old_string": "x", "new_string": "y"}),
                ),
                call("e2", "Bash", json!({"command": "rm -f build/out.o && ls"})),
            ],
        ),
        Message::new(
            Role::User,
            vec![
                result(
                    "e1",
                    "<tool_use_error>String not found</tool_use_error>",
                    true,
                ),
                result("e2", "", false),
            ],
        ),
    ];
    let f = Facts::of(&msgs);
    let got: Vec<(&str, FileAction)> = f
        .touches
        .iter()
        .map(|t| (t.path.as_str(), t.action))
        .collect();
    assert_eq!(got, vec![("build/out.o", FileAction::Deleted)]);
    assert_eq!(f.failures[0].first_line, "String not found");
    assert_eq!(f.failures[0].fixed_by, None);
}

#[test]
fn a_slash_commands_expanded_prompt_is_not_the_persons_words() {
    let msgs = vec![Message::new(
        Role::User,
        vec![
            Block::text(
                "<command-message>orchestrator is running…</command-message>\n<command-name>/orchestrator</command-name>\n<command-args>create TODO app</command-args>",
            ),
            Block::text("Split complex tasks into subtasks. Use Glob to list files."),
        ],
    )];
    let f = Facts::of(&msgs);
    assert_eq!(
        f.user,
        vec![UserFact {
            message: 0,
            text: "/orchestrator create TODO app".into()
        }]
    );
}

#[test]
fn responses_failure_fields_are_failures_with_the_cause_they_give() {
    let body = json!({"input": [
        {"role": "user", "content": "build and patch"},
        {"type": "shell_call", "call_id": "s1", "action": {"commands": ["make"]}, "status": "completed"},
        {"type": "shell_call_output", "call_id": "s1", "output": [
            {"stdout": "cc -c a.c", "stderr": "a.c:3: error: expected ';'", "outcome": {"type": "exit", "exit_code": 2}}]},
        {"type": "shell_call", "call_id": "s2", "action": {"commands": ["sleep 99"]}, "status": "completed"},
        {"type": "shell_call_output", "call_id": "s2", "output": [
            {"stdout": "", "stderr": "", "outcome": {"type": "timeout"}}]},
        {"type": "apply_patch_call", "call_id": "p1", "status": "completed",
         "operation": {"type": "update_file", "path": "a.c", "diff": "@@\n-x\n+y\n"}},
        {"type": "apply_patch_call_output", "call_id": "p1", "status": "failed", "output": "hunk 1 does not apply"},
        {"type": "mcp_call", "id": "mcp_1", "server_label": "db", "name": "query",
         "arguments": "{\"sql\": \"select 1\"}", "error": {"message": "permission denied for table t"}},
        {"type": "mcp_call", "id": "mcp_2", "server_label": "db", "name": "query",
         "arguments": "{}", "output": "1", "status": "completed"},
        {"type": "shell_call", "call_id": "s3", "action": {"commands": ["true"]}, "status": "completed"},
        {"type": "shell_call_output", "call_id": "s3", "output": [
            {"stdout": "", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]}
    ]});
    let conv = crate::format::Format::OpenAiResponses.read(&body).unwrap();
    let facts = Facts::of(&conv.messages);
    let failed: Vec<(String, String, String)> = facts
        .failures
        .iter()
        .map(|fl| {
            let c = facts.call_of(fl).unwrap();
            (c.id.clone(), c.tool.clone(), fl.first_line.clone())
        })
        .collect();
    assert_eq!(
        failed,
        vec![
            (
                "s1".into(),
                "shell".into(),
                "a.c:3: error: expected ';'".into()
            ),
            ("s2".into(), "shell".into(), "timed out".into()),
            (
                "p1".into(),
                "apply_patch".into(),
                "hunk 1 does not apply".into()
            ),
            (
                "mcp_1".into(),
                "db.query".into(),
                "permission denied for table t".into()
            ),
        ]
    );
    let outcomes: Vec<(String, Option<Outcome>)> = facts
        .calls
        .iter()
        .map(|c| (c.id.clone(), c.outcome))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            ("s1".into(), Some(Outcome::Error)),
            ("s2".into(), Some(Outcome::Error)),
            ("p1".into(), Some(Outcome::Error)),
            ("mcp_1".into(), Some(Outcome::Error)),
            ("mcp_2".into(), Some(Outcome::Success)),
            ("s3".into(), Some(Outcome::Success)),
        ]
    );
    // The patch that applied touched its file; the one that failed did not.
    let touched: Vec<(String, FileAction)> = facts
        .touches
        .iter()
        .map(|t| (t.path.clone(), t.action))
        .collect();
    assert_eq!(touched, vec![]);
    let ok = json!({"input": [
        {"role": "user", "content": "patch"},
        {"type": "apply_patch_call", "call_id": "p2", "status": "completed",
         "operation": {"type": "create_file", "path": "b.c", "diff": "+int b;\n"}},
        {"type": "apply_patch_call_output", "call_id": "p2", "status": "completed", "output": "Done"}
    ]});
    let conv = crate::format::Format::OpenAiResponses.read(&ok).unwrap();
    let facts = Facts::of(&conv.messages);
    let touched: Vec<(String, FileAction)> = facts
        .touches
        .iter()
        .map(|t| (t.path.clone(), t.action))
        .collect();
    assert_eq!(touched, vec![("b.c".to_string(), FileAction::Created)]);
}
