//! The cap on what one result may bring into the session: head and tail kept, cut at line
//! boundaries near the cut and at character boundaries always, with a marker saying how much
//! went. What the model saw is what the log keeps, so the cap is applied before recording.

/// `text` cut to at most about `max_bytes`: the head and the tail are kept, and a marker in
/// the middle says how much was cut. Returns whether anything was cut.
pub fn cap_text(text: &str, max_bytes: usize) -> (String, bool) {
    if text.len() <= max_bytes {
        return (text.to_owned(), false);
    }
    // Room for the marker, so the result stays within `max_bytes`.
    let budget = max_bytes.saturating_sub(200);
    let window = budget / 16;
    let head_end = snap_to_line(text, floor_char_boundary(text, budget / 2), window, true);
    let tail_start = snap_to_line(
        text,
        ceil_char_boundary(text, text.len() - (budget - budget / 2)),
        window,
        false,
    )
    .max(head_end);
    let cut = &text[head_end..tail_start];
    let marker = format!(
        "\n[… {} of {} bytes ({} lines) cut from the middle of this output; ask for less at a time (a narrower path, offset/limit, a more specific pattern) to see them …]\n",
        cut.len(),
        text.len(),
        cut.lines().count()
    );
    (
        format!("{}{marker}{}", &text[..head_end], &text[tail_start..]),
        true,
    )
}

/// Move a cut point to a line boundary if one is within `window` bytes (inward, so the kept
/// part only shrinks), so that lines are not split when they do not have to be.
fn snap_to_line(text: &str, at: usize, window: usize, head: bool) -> usize {
    if head {
        let from = at.saturating_sub(window);
        match text[..at].rfind('\n') {
            Some(newline) if newline >= from => newline + 1,
            _ => at,
        }
    } else {
        let to = (at + window).min(text.len());
        match text[at..].find('\n') {
            Some(offset) if at + offset < to => at + offset + 1,
            _ => at,
        }
    }
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_char_boundary(text: &str, mut at: usize) -> usize {
    while at < text.len() && !text.is_char_boundary(at) {
        at += 1;
    }
    at
}
