//! How the CLI talks to people: colour only on a terminal and never with `NO_COLOR`, tables with aligned columns,
//! durations in human units.

use std::io::IsTerminal as _;

/// Colours used for statuses.
#[derive(Debug, Clone, Copy)]
pub enum Tone {
    Good,
    Bad,
    Muted,
    Warn,
}

/// Whether standard error is a terminal and colour is welcome there.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub terminal: bool,
    pub color: bool,
}

impl Style {
    /// Decided from the environment: a terminal on standard error, `NO_COLOR` unset or empty, `--no-color` absent.
    pub fn detect(no_color_flag: bool) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self { terminal, color: terminal && !no_color && !no_color_flag }
    }

    pub fn paint(&self, text: &str, tone: Tone) -> String {
        if !self.color {
            return text.to_owned();
        }
        let code = match tone {
            Tone::Good => "32",
            Tone::Bad => "31",
            Tone::Muted => "2",
            Tone::Warn => "33",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }
}

/// `1.2 s`, `340 ms`, `2 min 5 s`.
pub fn duration(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// A plain text table: a header row and left-aligned columns separated by two spaces.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(i) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                let pad = widths[i].saturating_sub(cell.chars().count()) + 2;
                out.push_str(cell);
                out.push_str(&" ".repeat(pad));
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push('\n');
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// Prints a list: as JSON with `--json`, else as a table with one row per item.
pub fn print_list<T: serde::Serialize>(json: bool, items: &[T], header: &[&str], row: impl Fn(&T) -> Vec<String>) {
    if json {
        print_json(&items);
    } else {
        println!("{}", table(header, &items.iter().map(row).collect::<Vec<_>>()));
    }
}

/// Prints a JSON value, pretty.
pub fn print_json(value: &impl serde::Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        Err(e) => eprintln!("hookflow: cannot encode the answer as JSON: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(340), "340 ms");
        assert_eq!(duration(1_240), "1.2 s");
        assert_eq!(duration(125_000), "2 min 5 s");
    }

    #[test]
    fn tables_align_columns() {
        let rows = vec![vec!["checkout".to_owned(), "passed".to_owned()], vec!["a".to_owned(), "failed".to_owned()]];
        assert_eq!(table(&["FLOW", "STATUS"], &rows), "FLOW      STATUS\ncheckout  passed\na         failed");
    }

    #[test]
    fn no_colour_means_plain_text() {
        let style = Style { terminal: true, color: false };
        assert_eq!(style.paint("passed", Tone::Good), "passed");
        let style = Style { terminal: true, color: true };
        assert_eq!(style.paint("x", Tone::Bad), "\x1b[31mx\x1b[0m");
    }
}
