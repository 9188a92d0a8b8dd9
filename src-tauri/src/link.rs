//! `countersign://task/ID` links: what the OS hands the desktop app when a
//! person follows one (a notification, another app, the command line).
//! Kept out of the desktop module so headless builds test it too.

/// `countersign://task/ID` → the task id.
pub fn task_of_link(link: &str) -> Option<String> {
    let rest = link.strip_prefix("countersign://task/")?;
    let id = rest.trim_end_matches('/');
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    ok.then(|| id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::task_of_link;

    #[test]
    fn task_links_are_parsed_strictly() {
        assert_eq!(
            task_of_link("countersign://task/abc-1").as_deref(),
            Some("abc-1")
        );
        assert_eq!(
            task_of_link("countersign://task/abc/").as_deref(),
            Some("abc")
        );
        for bad in [
            "countersign://task/",
            "countersign://other/abc",
            "countersign://task/a'b",
            "https://task/abc",
        ] {
            assert_eq!(task_of_link(bad), None, "{bad}");
        }
    }
}
