//! What a program printed, kept to the output cap: its first half, and its last half as it
//! moves. It lives in the process that runs the tool, not in the engine's, so what was printed
//! before the engine was killed is still there to show.

use std::collections::VecDeque;

/// Printed lines, kept to `cap` bytes.
pub struct Output {
    cap: usize,
    head: String,
    tail: VecDeque<String>,
    tail_bytes: usize,
    /// Bytes cut from the middle (and from lines too long to keep whole).
    pub cut: usize,
}

impl Output {
    pub fn new(cap: usize) -> Output {
        Output {
            cap,
            head: String::new(),
            tail: VecDeque::new(),
            tail_bytes: 0,
            cut: 0,
        }
    }

    /// The longest line kept whole; the engine process cuts longer ones before sending them.
    pub fn longest_line(cap: usize) -> usize {
        cap / 2
    }

    /// Keep `line`, of which `already_cut` bytes were cut before it came here.
    pub fn push(&mut self, line: &str, already_cut: usize) {
        // One line longer than half the buffer keeps its start.
        let (kept, cut) = cut_line(line, self.cap);
        self.cut += already_cut + cut;
        let line = format!("{kept}\n");
        if self.head.len() + line.len() <= self.cap / 2 && self.tail.is_empty() {
            self.head.push_str(&line);
            return;
        }
        self.tail_bytes += line.len();
        self.tail.push_back(line);
        while self.tail_bytes > self.cap / 2 && self.tail.len() > 1 {
            let dropped = self.tail.pop_front().expect("not empty");
            self.tail_bytes -= dropped.len();
            self.cut += dropped.len();
        }
    }

    pub fn text(&self) -> String {
        let tail = self.tail.iter().map(String::as_str).collect::<String>();
        if self.cut == 0 {
            return format!("{}{tail}", self.head);
        }
        format!(
            "{}[… {} bytes of output cut here …]\n{tail}",
            self.head, self.cut
        )
    }
}

/// `line` cut to what [`Output`] keeps of it, and the bytes cut.
pub fn cut_line(line: &str, cap: usize) -> (&str, usize) {
    let max = Output::longest_line(cap);
    if line.len() <= max {
        return (line, 0);
    }
    let mut end = max;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    (&line[..end], line.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_and_the_tail_are_kept() {
        let mut output = Output::new(4096);
        for i in 0..10_000 {
            output.push(&format!("line {i}"), 0);
        }
        let text = output.text();
        assert!(output.cut > 0 && text.len() < 4096 + 100);
        assert!(text.starts_with("line 0\n") && text.ends_with("line 9999\n"));
    }

    #[test]
    fn a_long_line_keeps_its_start_and_counts_what_was_cut_before() {
        let long = "é".repeat(5000);
        let (kept, cut) = cut_line(&long, 4096);
        assert_eq!(kept.len() + cut, long.len());
        let mut output = Output::new(4096);
        output.push(kept, cut);
        assert!(output.text().contains("éé"));
        assert!(output.text().len() <= 4096 / 2 + 100);
        assert!(output.cut >= cut);
    }
}
