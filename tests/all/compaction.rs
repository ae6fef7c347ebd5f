//! `compactor compact` on the real corpus: every session, three presets, three budgets.
//! Every output must pass the guard and the independent checker, and never grow; the token
//! figures are snapshotted so a change in savings shows up in review.

use super::support::checker::{Batch, Body as Checked};
use compactor::config::Loader;
use compactor::format::{self, Format};
use compactor::guard::{self, Units, ValidateOptions};
use compactor::{Compactor, Status};
use std::fmt::Write as _;
use std::path::PathBuf;

/// Session logs and request bodies of the corpus that the importers read (the YAML cassette
/// holds several request bodies and is covered by the round-trip tests instead).
pub fn corpus_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = super::support::shared_dir("corpus")
        .into_iter()
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("jsonl" | "json")
            )
        })
        .collect();
    files.sort();
    files
}

fn engine(preset: &str) -> Compactor {
    let settings = Loader {
        preset: Some(preset.into()),
        env: false,
        ..Loader::default()
    }
    .load()
    .unwrap();
    Compactor::from_config(settings).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_corpus_session_compacts_validly_under_every_preset_and_budget() {
    let presets = ["default", "truncate", "microcompact"];
    let budgets = [50_000usize, 20_000, 8_000];
    let engines: Vec<(&str, Compactor)> = presets.iter().map(|p| (*p, engine(p))).collect();
    let mut checked = Batch::new("every_corpus_session_compacts_validly");
    let mut table = String::from("file | preset | budget | before | after | status\n");
    let mut failures = Vec::new();
    for file in corpus_files() {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(&file).unwrap();
        let loaded = match format::load(&bytes, None, Default::default()) {
            Ok(l) => l,
            Err(e) => {
                writeln!(table, "{name} | - | - | - | - | not imported: {e}").unwrap();
                continue;
            }
        };
        let input = &loaded.conversation;
        let fmt = loaded.format;
        let open_tail = Units::of(input, fmt)
            .exchanges
            .last()
            .is_some_and(|e| e.open);
        let input_body = fmt.write(input).to_string().into_bytes();
        for (preset, engine) in &engines {
            for budget in budgets {
                let out = engine.compact(input, fmt, Some(budget)).await.unwrap();
                let r = &out.report;
                let label = format!("{name} [{preset} @ {budget}]");
                let violations = guard::validate(
                    &out.conversation,
                    fmt,
                    ValidateOptions {
                        allow_open_tail: open_tail,
                    },
                );
                if !violations.is_empty() {
                    failures.push(format!("{label}: guard: {}", violations[0]));
                }
                if r.tokens_after > r.tokens_before {
                    failures.push(format!(
                        "{label}: grew {} -> {}",
                        r.tokens_before, r.tokens_after
                    ));
                }
                if *preset != "microcompact"
                    && r.tokens_before > budget
                    && r.status != Status::OverBudget
                    && r.tokens_after > budget
                {
                    failures.push(format!("{label}: over budget but status {:?}", r.status));
                }
                checked.push(Checked {
                    label,
                    output: fmt.write(&out.conversation).to_string().into_bytes(),
                    input: Some(input_body.clone()),
                    format: Some(fmt.as_str()),
                    open_tail,
                });
                let status = serde_json::to_value(r.status).unwrap();
                writeln!(
                    table,
                    "{name} | {preset} | {budget} | {} | {} | {}",
                    r.tokens_before,
                    r.tokens_after,
                    status.as_str().unwrap()
                )
                .unwrap();
            }
        }
    }
    // The independent checker on every output, against its input, in one Python run.
    failures.extend(checked.faults_named(|_| true));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    insta::assert_snapshot!("corpus_compaction", table);
}

fn tempfile_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("compactor-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[path = "../../examples/custom_strategy.rs"]
mod custom_strategy;

#[tokio::test]
async fn a_registered_custom_strategy_is_named_in_the_tier_list_and_its_output_taken() {
    let (messages, status, applied) = custom_strategy::run().await.unwrap();
    assert_eq!(status, Status::Compacted);
    assert_eq!(applied, "keep_tail");
    // Whole rounds (user + assistant) went from the front, the newest stayed, and the guard put
    // the strategy's marker in front of them.
    assert!(
        (3..20).contains(&messages) && messages % 2 == 1,
        "{messages}"
    );
}

#[tokio::test]
async fn a_config_file_names_a_registered_strategy_when_the_loader_accepts_its_name() {
    let dir = tempfile_dir("custom-tier");
    let file = dir.join("mine.toml");
    std::fs::write(
        &file,
        "[policy]\ntiers = [\"keep_tail\", \"truncate\"]\nremember = false\n",
    )
    .unwrap();
    let loader = Loader {
        file: Some(file.clone()),
        ..Loader::default()
    };
    // The built-in names alone: the file is at fault, and the message lists what is known.
    let err = loader.clone().load().unwrap_err().to_string();
    assert!(err.contains(&file.display().to_string()), "{err}");
    assert!(err.contains("unknown strategy \"keep_tail\""), "{err}");
    let registry = custom_strategy::registry();
    let settings = loader.accepting(registry.names()).load().unwrap();
    assert_eq!(settings.policy.tiers, ["keep_tail", "truncate"]);
    let (messages, status, applied) = custom_strategy::run_with(settings).await.unwrap();
    assert_eq!(status, Status::Compacted);
    assert_eq!(applied, "keep_tail");
    assert!((3..20).contains(&messages), "{messages}");
    // A name accepted by the loader but missing from the registry is still refused.
    let other = Loader {
        file: Some(file),
        ..Loader::default()
    }
    .accepting(["keep_tail"])
    .load()
    .unwrap();
    let err = Compactor::from_registry(other, &compactor::registry::Registry::builtin())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("keep_tail"), "{err}");
    std::fs::remove_dir_all(dir).ok();
}

/// A support-bot session of 5,000 short requests: the record keeps the first request and the
/// newest, names the run left out between them, and the output fits the budget (the words
/// were kept whole past the limit before, 4.3x over a 20,000 budget).
#[tokio::test]
async fn five_thousand_requests_fit_the_budget_keeping_the_task_and_the_newest() {
    use compactor::conversation::{Conversation, Message, Role};
    use compactor::strategy::Edit;
    let mut messages = Vec::new();
    for k in 1..=5_000 {
        messages.push(Message::text(
            Role::User,
            format!("Please look at ticket {k} and tell me its status."),
        ));
        messages.push(Message::text(
            Role::Assistant,
            format!("Ticket {k} is open."),
        ));
    }
    messages.push(Message::text(Role::User, "Summarize everything."));
    let input = Conversation {
        messages,
        ..Default::default()
    };
    for preset in ["default", "truncate"] {
        let out = engine(preset)
            .compact(&input, Format::Anthropic, Some(20_000))
            .await
            .unwrap();
        let r = &out.report;
        assert_eq!(r.status, Status::Compacted, "{preset}");
        assert!(r.tokens_after <= 20_000, "{preset}: {}", r.tokens_after);
        let text = serde_json::to_string(&Format::Anthropic.write(&out.conversation)).unwrap();
        assert!(
            text.contains("[user] #1: Please look at ticket 1 and tell me"),
            "{preset}"
        );
        let left_out = r
            .tiers
            .iter()
            .flat_map(|t| &t.edits)
            .find_map(|e| match e {
                Edit::Dropped { user_words, .. } => user_words.left_out,
                _ => None,
            })
            .expect("a dropped span with requests left out");
        assert_eq!(left_out.first, 2, "{preset}");
        assert!(left_out.count > 1_000, "{preset}: {left_out:?}");
        assert!(
            text.contains(&format!(
                "[… {} earlier requests left out: #2–#{}]",
                left_out.count, left_out.last
            )),
            "{preset}"
        );
        // The newest request before the open one is written whole.
        assert!(
            text.contains("[user] #5000: Please look at ticket 5000"),
            "{preset}"
        );
        let note = r.tiers.iter().flat_map(|t| &t.notes).any(|n| {
            n.contains(&format!(
                "{} requests left out (#2–#{})",
                left_out.count, left_out.last
            ))
        });
        assert!(note, "{preset}: {:?}", r.tiers);
    }
}
