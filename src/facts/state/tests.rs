use super::*;
use crate::conversation::{Message, Role};
use crate::facts::Facts;
use crate::facts::test_blocks::{call, result};
use crate::tokens::TiktokenCounter;
use serde_json::json;

fn session() -> Vec<Message> {
    vec![
        Message::text(Role::User, "Fix the build. Never touch vendor/."),
        Message::new(
            Role::Assistant,
            vec![call("t1", "Bash", json!({"command": "cargo build"}))],
        ),
        Message::new(
            Role::User,
            vec![result(
                "t1",
                "Exit code 101\nerror[E0425]: cannot find `b`\nerror: could not compile",
                true,
            )],
        ),
        Message::new(
            Role::Assistant,
            vec![call(
                "t2",
                "Edit",
                json!({"file_path": "/p/q/src/a.rs", "old_string": "a", "new_string": "b"}),
            )],
        ),
        Message::new(Role::User, vec![result("t2", "ok", false)]),
        Message::new(
            Role::Assistant,
            vec![call("t3", "Bash", json!({"command": "cargo build"}))],
        ),
        Message::new(Role::User, vec![result("t3", "Finished", false)]),
        Message::text(Role::User, "Now commit."),
    ]
}

fn counter() -> TiktokenCounter {
    TiktokenCounter::new(crate::tokens::Tokenizer::default())
}

/// A session of `n` user requests, each answered by the assistant.
fn chat(n: usize, text: impl Fn(usize) -> String) -> Vec<Message> {
    (1..=n)
        .flat_map(|k| {
            [
                Message::text(Role::User, text(k)),
                Message::text(Role::Assistant, format!("done {k}")),
            ]
        })
        .collect()
}

proptest::proptest! {
    /// However many requests and whatever the room: every request of the span is written
    /// verbatim, tagged shortened, or one of a single left-out run from #2 that a line
    /// names; the first and the newest are always written; the user's lines stay within
    /// the ceiling unless that is less than the first and the newest.
    #[test]
    fn every_request_is_written_tagged_or_named_as_left_out(
        n in 1usize..400,
        room in 40usize..6_000,
        long_every in 1usize..6,
    ) {
        let text = |k: usize| {
            if k.is_multiple_of(long_every) {
                format!("Request {k} asks for a thing. It goes on. And on. You must keep file{k}.rs. The last word {k}.")
            } else {
                format!("Request {k}: short.")
            }
        };
        let msgs = chat(n, text);
        let facts = Facts::of(&msgs);
        let c = counter();
        let r = SessionState::of(&facts, 0..msgs.len()).with_words_ceiling(room).render(room / 2, &c);
        let user: Vec<&String> = r.lines.iter().filter(|l| l.starts_with("[user] #")).collect();
        let written: Vec<usize> = user
            .iter()
            .map(|l| l.strip_prefix("[user] #").unwrap().split([' ', ':']).next().unwrap().parse().unwrap())
            .collect();
        // Written, in order, then the left-out run between the first and the rest.
        let mut all = written.clone();
        if let Some(l) = r.user_words.left_out {
            all.extend(l.first..=l.last);
        }
        all.sort_unstable();
        proptest::prop_assert_eq!(all, (1..=n).collect::<Vec<_>>());
        proptest::prop_assert_eq!(written.first(), Some(&1));
        proptest::prop_assert_eq!(written.last(), Some(&n));
        if let Some(LeftOut { count, first: a, last: b }) = r.user_words.left_out {
            proptest::prop_assert_eq!(a, 2);
            proptest::prop_assert_eq!(b - a + 1, count);
            let named = if a == b {
                "[… 1 earlier request left out: #2]".to_string()
            } else {
                format!("[… {count} earlier requests left out: #2–#{b}]")
            };
            proptest::prop_assert!(r.lines.contains(&named), "{:?}", r.lines);
            let users_cost: usize = user.iter().map(|l| c.count_text(l) + 1).sum::<usize>()
                + c.count_text(&named) + 1;
            let two = user.iter().take(1).chain(user.last()).map(|l| c.count_text(l) + 1).sum::<usize>();
            proptest::prop_assert!(users_cost <= room.max(two + c.count_text(&named) + 1), "{} of {}", users_cost, room);
        } else {
            proptest::prop_assert_eq!(written.len(), n);
        }
        // A line is tagged shortened exactly when its request is typed as shortened, and
        // then it is not the request's text.
        for (l, k) in user.iter().zip(&written) {
            let tagged = l.starts_with(&format!("[user] #{k} (shortened): "));
            proptest::prop_assert_eq!(tagged, r.user_words.shortened.contains(k));
            let whole = format!("[user] #{k}: {}", text(*k));
            proptest::prop_assert_eq!(tagged, **l != whole, "{}", l);
        }
        // The title says verbatim exactly when no line is tagged or names a left-out run.
        let marked = user.iter().any(|l| l.contains(" (shortened): "))
            || r.lines.iter().any(|l| l.contains(" left out: #"));
        let title = if marked {
            "The user's words, oldest first, verbatim except where marked:"
        } else {
            "The user's words, verbatim, oldest first:"
        };
        proptest::prop_assert_eq!(r.lines.first().map(String::as_str), Some(title));
    }
}

#[test]
fn a_shortened_request_stays_tagged_when_merged_forward() {
    const ROOM: usize = 200;
    let long = format!(
        "Port the parser to nom. {}Never change the public API. Report the timings.",
        "It is slow and old. ".repeat(30)
    );
    let msgs = chat(3, |k| {
        if k == 2 {
            long.clone()
        } else {
            format!("Request {k}.")
        }
    });
    let c = counter();
    let facts = Facts::of(&msgs);
    // A room small enough that the words whole take more than half of it.
    let first = SessionState::of(&facts, 0..msgs.len()).marker_text(6, 100, ROOM, &c);
    assert!(
        first.contains("[user] #2 (shortened): Port the parser to nom. … Never change the public API. … Report the timings."),
        "{first}"
    );
    // The next pass reads it back: still shortened, once, with its number.
    let again = Facts::of(&[Message::text(Role::User, first)]);
    let state = SessionState::of(&again, 0..1);
    let r = state.render(2_000, &c);
    assert_eq!(r.user_words.shortened, vec![2]);
    assert!(
        r.lines.contains(&"[user] #2 (shortened): Port the parser to nom. … Never change the public API. … Report the timings.".to_string()),
        "{:?}",
        r.lines
    );
}

#[test]
fn a_left_out_run_is_carried_into_the_next_record() {
    let c = counter();
    let msgs = chat(600, |k| format!("Please handle ticket {k} now."));
    let facts = Facts::of(&msgs);
    let first = SessionState::of(&facts, 0..msgs.len())
        .with_words_ceiling(1_000)
        .marker_text(msgs.len(), 0, 500, &c);
    let run1 = SessionState::of(&facts, 0..msgs.len())
        .with_words_ceiling(1_000)
        .render(500, &c)
        .user_words
        .left_out
        .expect("a run left out");
    // The next pass: the record, then 100 new requests, all dropped with a tight ceiling.
    let mut again = vec![Message::text(Role::User, first)];
    again.extend(chat(100, |k| format!("And then ticket {}.", 600 + k)));
    let facts = Facts::of(&again);
    let r = SessionState::of(&facts, 0..again.len())
        .with_words_ceiling(600)
        .render(300, &c);
    let run2 = r.user_words.left_out.expect("a run left out");
    // One run from #2: the earlier one and this pass's, counted together.
    assert_eq!(run2.first, 2);
    assert!(run2.count > run1.count, "{run1:?} {run2:?}");
    assert!(run2.last > 600, "{run2:?}");
    let named = format!(
        "[… {} earlier requests left out: #2–#{}]",
        run2.count, run2.last
    );
    assert_eq!(r.lines[1..4].last(), Some(&named), "{:?}", &r.lines[..6]);
    // Every request is written or inside the run: none is lost without a mention.
    let written: Vec<usize> = r
        .lines
        .iter()
        .filter_map(|l| l.strip_prefix("[user] #"))
        .map(|l| l.split([' ', ':']).next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(written[0], 1);
    assert_eq!(written[1], run2.last + 1);
    assert_eq!(*written.last().unwrap(), 700);
    assert_eq!(run2.count + written.len(), 700);
    // Not counted again as other omitted items.
    assert!(
        !r.lines
            .iter()
            .any(|l| l.contains("more items omitted") && l.contains(&run1.count.to_string()))
    );
}

#[test]
fn failures_are_counted_before_the_user_words_take_their_share() {
    let c = counter();
    let mut msgs = Vec::new();
    for k in 1..=300 {
        msgs.push(Message::text(
            Role::User,
            format!("Please handle ticket {k} now."),
        ));
        if k % 7 == 0 {
            let id = format!("t{k}");
            msgs.push(Message::new(
                Role::Assistant,
                vec![call(&id, "Bash", json!({"command": format!("deploy {k}")}))],
            ));
            msgs.push(Message::new(
                Role::User,
                vec![result(
                    &id,
                    "error: the deploy failed because the host is down",
                    true,
                )],
            ));
        }
        msgs.push(Message::text(Role::Assistant, format!("done {k}")));
    }
    let facts = Facts::of(&msgs);
    let ceiling = 3_000;
    let r = SessionState::of(&facts, 0..msgs.len())
        .with_words_ceiling(ceiling)
        .render(1_500, &c);
    assert_eq!(r.failures.len(), 42);
    assert!(r.user_words.left_out.is_some());
    let text = r.lines.join("\n");
    assert!(c.count_text(&text) <= ceiling, "{}", c.count_text(&text));
}

#[test]
fn five_thousand_requests_keep_the_task_and_the_newest_within_the_room() {
    let msgs = chat(5_000, |k| format!("Please handle ticket {k} now."));
    let c = counter();
    let facts = Facts::of(&msgs);
    let r = SessionState::of(&facts, 0..msgs.len())
        .with_words_ceiling(2_000)
        .render(1_000, &c);
    let text = r.lines.join("\n");
    assert!(c.count_text(&text) <= 2_000, "{}", c.count_text(&text));
    let gap = r.user_words.left_out.expect("requests left out").count;
    assert!(gap > 4_000, "{gap}");
    // The task, its outcome, the line naming the run, then the newest requests.
    assert_eq!(
        r.lines[1..4],
        [
            "[user] #1: Please handle ticket 1 now.".to_string(),
            "[then] #1: answered: done 1".to_string(),
            format!("[… {gap} earlier requests left out: #2–#{}]", gap + 1),
        ]
    );
    assert_eq!(
        r.lines[4],
        format!("[user] #{}: Please handle ticket {} now.", gap + 2, gap + 2)
    );
    assert!(text.contains("[user] #5000: Please handle ticket 5000 now."));
}

#[test]
fn shedding_leaves_out_only_the_outcomes_of_settled_rounds() {
    let mut msgs = session();
    // A second request whose one call succeeds: a settled round.
    msgs.push(Message::new(
        Role::Assistant,
        vec![call("t4", "Bash", json!({"command": "git commit -am fix"}))],
    ));
    msgs.push(Message::new(
        Role::User,
        vec![result("t4", "1 file changed", false)],
    ));
    msgs.push(Message::text(Role::User, "Thanks."));
    let facts = Facts::of(&msgs);
    let then_lines = |state: SessionState| -> Vec<String> {
        state
            .render(2_000, &counter())
            .lines
            .into_iter()
            .filter(|l| l.starts_with("[then]"))
            .collect()
    };
    let full = then_lines(SessionState::of(&facts, 0..10));
    assert_eq!(full.len(), 2, "{full:?}");
    assert!(
        full[1].starts_with("[then] #2: ran git commit -am fix: ok"),
        "{full:?}"
    );
    // The round with a failure keeps its outcome; the settled one goes.
    let lean = then_lines(SessionState::of(&facts, 0..10).shedding_settled());
    assert_eq!(lean, vec![full[0].clone()]);
}

#[test]
fn the_state_keeps_words_files_failures_and_commands() {
    let msgs = session();
    let facts = Facts::of(&msgs);
    let text = SessionState::of(&facts, 0..7).marker_text(7, 500, 2_000, &counter());
    let lines: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(
        lines,
        vec![
            "The user's words, verbatim, oldest first:",
            "[user] #1: Fix the build. Never touch vendor/.",
            "[then] #1: ran cargo build: failed; Edit src/a.rs: ok; 3 calls, 1 failed",
            "Files and what was done to them:",
            "[edited] src/a.rs",
            "Failures (first and last error line, and the fix when one followed):",
            "[failed t1] Bash, command cargo build: error: error[E0425]: cannot find `b` | error: could not compile -> fixed by t3 at message 5",
            "Commands and their outcome:",
            "[ran failed] cargo build (t1)",
            "[ran ok] cargo build (t3)",
            "Other calls and replies:",
            "[call t2] Edit, src/a.rs: ok",
        ]
    );
    assert!(
        text.lines()
            .next()
            .unwrap_or("")
            .contains("not instructions")
    );
}

#[test]
fn a_fix_in_the_kept_part_is_named_as_kept() {
    let msgs = session();
    let facts = Facts::of(&msgs);
    let r = SessionState::of(&facts, 0..3).render(2_000, &counter());
    assert!(
        r.lines
            .iter()
            .any(|l| l.starts_with("[failed t1]") && l.ends_with("-> fixed by t3 kept below")),
        "{:?}",
        r.lines
    );
}

#[test]
fn recompaction_merges_the_earlier_state() {
    let msgs = session();
    let facts = Facts::of(&msgs);
    let c = counter();
    let first = SessionState::of(&facts, 0..7).marker_text(7, 500, 2_000, &c);
    let mut again = vec![Message::text(Role::User, first)];
    again.push(Message::new(
        Role::Assistant,
        vec![call("t9", "Bash", json!({"command": "git commit"}))],
    ));
    again.push(Message::new(Role::User, vec![result("t9", "done", false)]));
    let facts2 = Facts::of(&again);
    let second = SessionState::of(&facts2, 0..3).marker_text(3, 600, 2_000, &c);
    assert!(
        second.contains("[user] #1: Fix the build. Never touch vendor/."),
        "{second}"
    );
    assert!(
        second.contains("[failed t1] Bash, command cargo build: error: error[E0425]"),
        "{second}"
    );
    assert!(second.contains("[edited] src/a.rs"), "{second}");
    assert!(second.contains("[ran ok] git commit (t9)"), "{second}");
    assert_eq!(second.matches(MARKER_PREFIX).count(), 1);
    // A third pass over the same state changes nothing but the counts in the first line.
    let facts3 = Facts::of(&[Message::text(Role::User, second.clone())]);
    let third = SessionState::of(&facts3, 0..1).marker_text(3, 600, 2_000, &c);
    assert_eq!(
        third.lines().skip(1).collect::<Vec<_>>(),
        second.lines().skip(1).collect::<Vec<_>>()
    );
}

#[test]
fn a_tight_budget_shortens_long_requests_around_constraints_and_counts_what_went() {
    let long = "Migrate billing. Read models.py. Then plan. Then implement with tests. \
                Keep commits small. Hard rule: never edit migrations/legacy/. Report.";
    let mut msgs = vec![Message::text(Role::User, long)];
    for i in 0..30 {
        let id = format!("r{i}");
        msgs.push(Message::new(
            Role::Assistant,
            vec![call(
                &id,
                "Bash",
                json!({"command": format!("make step{i}")}),
            )],
        ));
        msgs.push(Message::new(Role::User, vec![result(&id, "ok", false)]));
    }
    let facts = Facts::of(&msgs);
    let r = SessionState::of(&facts, 0..msgs.len()).render(60, &counter());
    assert_eq!(
        r.lines[0],
        "The user's words, oldest first, verbatim except where marked:"
    );
    assert!(
        r.lines
            .iter()
            .any(|l| l.contains("Hard rule: never edit migrations/legacy/.")),
        "{:?}",
        r.lines
    );
    assert!(
        !r.lines.iter().any(|l| l.contains("Then plan.")),
        "{:?}",
        r.lines
    );
    assert!(r.omitted > 0);
    assert_eq!(
        r.lines.last().map(String::as_str),
        Some(format!("[… {} more items omitted]", r.omitted).as_str())
    );
}

#[test]
fn a_shortened_request_keeps_a_repeated_instruction_once_and_types_the_repeats() {
    let long = format!(
        "Clean up the parser. {}Rename the module. Never touch the lexer. Report.",
        "Always run tests. ".repeat(40)
    );
    let msgs = vec![Message::text(Role::User, long)];
    let facts = Facts::of(&msgs);
    let r = SessionState::of(&facts, 0..1).render(60, &counter());
    assert_eq!(
        r.lines,
        vec![
            "The user's words, oldest first, verbatim except where marked:".to_string(),
            "[user] #1 (shortened): Clean up the parser. … Always run tests. [… 39 repeats \
             left out] … Never touch the lexer. … Report."
                .to_string(),
            "[then] #1: continued in the messages below".to_string(),
        ]
    );
    assert_eq!(r.user_words.shortened, vec![1]);
    assert_eq!(r.user_words.repeats_left_out, 39);
    assert_eq!(
        r.user_words.note(),
        "the record's user words: 1 requests shortened around their constraint sentences \
         (#1), 39 repeated sentences left out"
    );
}

#[test]
fn a_summary_item_is_what_render_writes_and_reads_back_whole() {
    let text = "They fixed the build.\n\n- [call x1] is not a line of the state.";
    let item = summary_item(SummaryKind::Compactor, text);
    assert_eq!(
        item,
        "[summary compactor]\n  They fixed the build.\n  \n  - [call x1] is not a line of the state."
    );
    let marker = format!("{MARKER_PREFIX} earlier\n{item}\n");
    let facts = Facts::of(&[Message::text(Role::User, marker)]);
    let r = SessionState::of(&facts, 0..1).render(500, &counter());
    assert_eq!(
        r.lines,
        vec!["Earlier summaries, carried forward:".to_string(), item]
    );
}

#[test]
fn the_first_digest_format_is_merged_too() {
    let old = format!(
        "{MARKER_PREFIX} 40 earlier messages were removed. One line per block:\n[user] continue with module 3\n[result toolu_05 Bash (error): …FAILED tests/t5.py - AssertionError]\n[result toolu_06 Bash: ok]\n"
    );
    let facts = Facts::of(&[Message::text(Role::User, old)]);
    let r = SessionState::of(&facts, 0..1).render(500, &counter());
    assert!(
        r.lines
            .contains(&"[user] #1: continue with module 3".to_string()),
        "{:?}",
        r.lines
    );
    assert!(
        r.lines.contains(
            &"[failed toolu_05] Bash error: FAILED tests/t5.py - AssertionError".to_string()
        ),
        "{:?}",
        r.lines
    );
    assert_eq!(r.failures, vec!["toolu_05".to_string()]);
}
