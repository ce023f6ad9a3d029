//! The last lines of a log file, for a failure's message.

use std::path::Path;

/// The last `lines` lines of the file at `path` (empty when it cannot be read).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_lines_or_all_of_a_short_file() {
        let path = std::env::temp_dir().join(format!("log-tail-{}.log", std::process::id()));
        std::fs::write(&path, "a\nb\nc\n").expect("write");
        assert_eq!(log_tail(&path, 2), "b\nc");
        assert_eq!(log_tail(&path, 20), "a\nb\nc");
        std::fs::remove_file(&path).expect("remove");
        assert_eq!(log_tail(&path, 2), "");
    }
}
