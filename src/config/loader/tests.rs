//! Unit tests of the loader: the built-in files, the layers and their order, errors naming
//! their source and key.

use super::*;

fn loader() -> Loader {
    Loader {
        file: None,
        text: None,
        preset: None,
        env: false,
        preset_dirs: Vec::new(),
        strategies: Vec::new(),
    }
}

#[test]
fn built_in_defaults_and_presets_load() {
    let s = loader().load().unwrap();
    assert_eq!(s.preset, "default");
    assert_eq!(s.budget.budget(None), 180_000);
    assert_eq!(s.policy.tiers, vec!["microcompact", "summary", "truncate"]);
    for (name, _) in BUILTIN_PRESETS {
        let s = Loader {
            preset: Some(name.to_string()),
            ..loader()
        }
        .load()
        .unwrap();
        assert_eq!(&s.preset, name);
    }
    let t = Loader {
        preset: Some("truncate".into()),
        ..loader()
    }
    .load()
    .unwrap();
    assert_eq!(t.policy.tiers, vec!["truncate"]);
}

#[test]
fn default_settings_are_the_built_in_files_alone() {
    let loaded = loader().load().unwrap();
    assert_eq!(Settings::default(), loaded);
    assert_eq!(builtin().budget, loaded.budget);
    assert_eq!(builtin().policy, loaded.policy);
    let l = Loader::default();
    assert!(!l.env && l.preset_dirs.is_empty() && l.file.is_none() && l.preset.is_none());
}

#[test]
fn from_environment_reads_variables_and_the_strategies_directories() {
    let l = Loader::from_environment();
    assert!(l.env);
    assert_eq!(l.preset_dirs.last(), Some(&PathBuf::from("strategies")));
}

#[test]
fn unknown_keys_are_rejected_by_name() {
    let dir = std::env::temp_dir().join(format!("compactor-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    std::fs::write(&file, "[truncate]\nmax_tool_result_tokenz = 5\n").unwrap();
    let err = Loader {
        file: Some(file),
        ..loader()
    }
    .load()
    .unwrap_err()
    .to_string();
    assert!(err.contains("max_tool_result_tokenz"), "{err}");
}

#[test]
fn a_digest_max_share_below_the_floor_is_refused_by_name() {
    let dir = std::env::temp_dir().join(format!("compactor-cfg-max-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let load = |body: &str| {
        let file = dir.join("share.toml");
        std::fs::write(&file, body).unwrap();
        Loader {
            file: Some(file),
            ..loader()
        }
        .load()
    };
    let err = load("[truncate]\ndigest_share = 0.2\ndigest_max_share = 0.1\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("truncate.digest_max_share"), "{err}");
    let ok = load("[truncate]\ndigest_share = 0.2\ndigest_max_share = 0.2\n").unwrap();
    assert_eq!(ok.truncate.digest_max_share, 0.2);
}

#[test]
fn llm_extra_body_is_read_as_a_json_object() {
    let dir = std::env::temp_dir().join(format!("compactor-cfg3-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("llm.toml");
    std::fs::write(
        &file,
        "[llm]\nprovider = \"openai\"\nmodel = \"m\"\n\
         extra_body = { frequency_penalty = 0.5, top_k = 40, stop = [\"</s>\"] }\n",
    )
    .unwrap();
    let s = Loader {
        file: Some(file),
        ..loader()
    }
    .load()
    .unwrap();
    let extra = serde_json::Value::Object(s.llm.unwrap().extra_body);
    assert_eq!(
        extra,
        serde_json::json!({"frequency_penalty": 0.5, "top_k": 40, "stop": ["</s>"]})
    );
}

#[test]
fn out_of_range_values_name_their_key() {
    let dir = std::env::temp_dir().join(format!("compactor-cfg2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("range.toml");
    std::fs::write(&file, "[budget]\ntrigger = 0.5\ntarget = 0.7\n").unwrap();
    let err = load_error(&file);
    assert_eq!(
        err,
        format!(
            "config file {}: configuration: budget.target: must be in (0, trigger = 0.5], found 0.7",
            file.display()
        )
    );
}

/// The error of loading `file` over the built-in defaults.
fn load_error(file: &Path) -> String {
    Loader {
        file: Some(file.to_path_buf()),
        ..loader()
    }
    .load()
    .unwrap_err()
    .to_string()
}

fn file_with(tag: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("compactor-cfg-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{tag}.toml"));
    std::fs::write(&file, text).unwrap();
    file
}

#[test]
fn every_duration_is_bounded_by_a_day_and_names_its_key() {
    for (text, key) in [
        (
            "[server]\nheader_read_timeout_secs = 9223372036854775807\n",
            "server.header_read_timeout_secs",
        ),
        (
            "[server]\nidle_timeout_secs = 86401\n",
            "server.idle_timeout_secs",
        ),
        (
            "[server]\nbody_timeout_secs = 0\n",
            "server.body_timeout_secs",
        ),
        (
            "[server]\nshutdown_timeout_secs = 100000000\n",
            "server.shutdown_timeout_secs",
        ),
        (
            "[server]\nsummary_budget_secs = 1e300\n",
            "server.summary_budget_secs",
        ),
        (
            "[store]\ntimeout_ms = 9223372036854775807\n",
            "store.timeout_ms",
        ),
        (
            "[store]\nretry_secs = 9223372036854775807\n",
            "store.retry_secs",
        ),
        (
            "[summary]\ncooldown_secs = 1e300\n",
            "summary.cooldown_secs",
        ),
        (
            "[llm]\nprovider = \"openai\"\nmodel = \"m\"\ntimeout_secs = 1e300\n",
            "llm.timeout_secs",
        ),
    ] {
        let file = file_with("secs", text);
        let err = load_error(&file);
        assert!(
            err.starts_with(&format!(
                "config file {}: configuration: {key}: must be",
                file.display()
            )),
            "{text}: {err}"
        );
    }
}

#[test]
fn an_integer_too_large_for_toml_is_an_error_naming_its_key() {
    let file = file_with(
        "huge",
        "[server] # the service\nrequest_timeout_secs = 18446744073709551615\n",
    );
    let err = load_error(&file);
    assert_eq!(
        err,
        format!(
            "config file {}: configuration: server.request_timeout_secs: \
             18446744073709551615 is larger than a TOML integer can be \
             (9223372036854775807); see the key's documented range",
            file.display()
        )
    );
    assert_eq!(
        oversized_integer("a = 1\n[x.y]\nb = -9_223_372_036_854_775_809\nc = 2"),
        Some(("x.y.b".into(), "-9_223_372_036_854_775_809".into()))
    );
    assert_eq!(
        oversized_integer("a = 9223372036854775807\nb = \"99999999999999999999\""),
        None
    );
}

#[test]
fn a_config_files_tiers_win_over_the_implicit_default_preset_but_not_an_explicit_one() {
    let file = file_with("tiers", "[policy]\ntiers = [\"truncate\"]\n");
    let s = Loader {
        file: Some(file.clone()),
        ..loader()
    }
    .load()
    .unwrap();
    assert_eq!(s.policy.tiers, vec!["truncate"]);
    let s = Loader {
        file: Some(file),
        preset: Some("microcompact".into()),
        ..loader()
    }
    .load()
    .unwrap();
    assert_eq!(s.policy.tiers, vec!["microcompact"]);
}

#[test]
fn an_unknown_tier_is_an_error_naming_the_file_even_when_a_preset_overrides_it() {
    let file = file_with("typo", "[policy]\ntiers = [\"microcompakt\"]\n");
    for preset in [None, Some("truncate".to_string())] {
        let err = Loader {
            file: Some(file.clone()),
            preset,
            ..loader()
        }
        .load()
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            format!(
                "config file {}: configuration: policy.tiers: unknown strategy \"microcompakt\" \
                 (known: microcompact, summary, truncate)",
                file.display()
            )
        );
    }
}

#[test]
fn two_settings_live_side_by_side() {
    let a = Loader {
        preset: Some("truncate".into()),
        ..loader()
    }
    .load()
    .unwrap();
    let b = Loader {
        preset: Some("microcompact".into()),
        ..loader()
    }
    .load()
    .unwrap();
    assert_ne!(a.policy, b.policy);
    assert_eq!(b.microcompact.keep_recent, 3);
    assert_eq!(a.microcompact.keep_recent, 5);
}

#[test]
fn a_user_preset_file_is_found_without_rebuilding() {
    let dir = std::env::temp_dir().join(format!("compactor-presets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("gentle.toml"),
        "description = \"mine\"\n[budget]\ntrigger = 0.9\n",
    )
    .unwrap();
    let s = Loader {
        preset: Some("gentle".into()),
        preset_dirs: vec![dir],
        ..loader()
    }
    .load()
    .unwrap();
    assert_eq!(s.preset, "gentle");
    assert_eq!(s.budget.trigger, 0.9);
    assert_eq!(s.description.as_deref(), Some("mine"));
}

#[test]
fn a_config_text_layers_like_a_file_and_errors_name_it_not_a_path() {
    let text = |json: &str| Loader {
        text: Some(ConfigText {
            name: "config dict".into(),
            json: json.into(),
        }),
        ..loader()
    };
    let s = text(r#"{"budget": {"tokens": 20000}}"#).load().unwrap();
    assert_eq!(s.budget.budget(None), 20_000);
    let e = text(r#"{"budget": {"trigger": 2.0}}"#).load().unwrap_err();
    assert_eq!(
        e.to_string(),
        "config dict: configuration: budget.trigger: must be in (0, 1], found 2"
    );
    let e = text(r#"{"budget": {"tigger": 0.5}}"#).load().unwrap_err();
    assert!(
        e.to_string().starts_with("config dict: configuration: "),
        "{e}"
    );
    assert!(!e.to_string().contains('/'), "{e}");
}
