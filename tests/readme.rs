//! The README tells the truth: its config example parses, and its two set-up
//! commands are the ones CI runs.
use std::path::Path;

use countersign::config::{BackendKind, Config};

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

#[test]
fn readme_config_example_is_a_valid_config() {
    let text = readme();
    let section = text
        .split("## Configuration")
        .nth(1)
        .expect("a Configuration section");
    let toml = section
        .split("```toml")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a toml block");
    let cfg = Config::parse(toml, Path::new("README.md")).unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<&str> = cfg.agents.iter().map(|a| a.id.get_ref().as_str()).collect();
    assert_eq!(ids, ["inbox", "demo"]);
    assert_eq!(cfg.agents[1].backend, BackendKind::Scripted);
    assert_eq!(cfg.agents[1].rules.len(), 3);
    assert_eq!(cfg.access.credentials.len(), 2);
    assert_eq!(cfg.retention.keep_days, 90);
    assert_eq!(cfg.rate_limits.a2a.per_second, 100);
    assert!(!cfg.rate_limits.limit_loopback);
    assert_eq!(cfg.rate_limits.connections, 256);
    assert_eq!(cfg.tenants.len(), 1);
    assert_eq!(cfg.tenants[0].agents[0].tenant.as_deref(), Some("acme"));
    assert_eq!(cfg.tenants[0].credentials.len(), 1);
    // The push/chains example parses too.
    let chains = section
        .split("```toml")
        .nth(2)
        .and_then(|b| b.split("```").next())
        .expect("a second toml block");
    let cfg = Config::parse(chains, Path::new("README.md")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.chains.len(), 2);
    assert_eq!(cfg.chains[1].id, "chain-2");
    assert_eq!(cfg.outbound.allow.len(), 4);
}

#[test]
fn readme_test_command_is_what_ci_runs() {
    let text = readme();
    let setup = text
        .split("## Set up")
        .nth(1)
        .and_then(|s| s.split("```sh").nth(1))
        .and_then(|b| b.split("```").next())
        .unwrap();
    let commands: Vec<&str> = setup
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(commands, ["bash scripts/start.sh", "bash scripts/test.sh"]);
    let ci =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/run")).unwrap();
    assert!(
        ci.contains("scripts/test.sh"),
        "CI must run the README's test command"
    );
}
