//! The report chart's drawing surface ([`Svg`]): lanes on a shared time axis ([`Scale`]), the
//! rectangles, lines and labels drawn in them. The chart's panels and lanes draw through it.

use std::fmt::Write as _;

use super::esc;

/// The SVG's width; the left gutter holds the lane names.
pub const WIDTH: f64 = 1280.0;
pub(super) const LEFT: f64 = 230.0;
pub(super) const RIGHT: f64 = 24.0;
pub(super) const LANE: f64 = 24.0;
const GAP: f64 = 10.0;

/// Maps run time (ms) to x.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    pub end_ms: u64,
}

impl Scale {
    pub fn x(self, ms: u64) -> f64 {
        LEFT + (ms.min(self.end_ms) as f64 / self.end_ms.max(1) as f64) * (WIDTH - LEFT - RIGHT)
    }
}

/// The SVG under construction: the body, the next lane's top, the scale.
pub(super) struct Svg {
    pub(super) body: String,
    pub(super) y: f64,
    pub(super) scale: Scale,
}

impl Svg {
    /// Opens a lane of `height` named `label`; returns its top.
    pub(super) fn lane(&mut self, id: &str, label: &str, height: f64) -> f64 {
        let top = self.y;
        let _ = write!(
            self.body,
            r#"<g class="lane" data-lane="{}"><rect class="lane-bg" x="{LEFT}" y="{top}" width="{}" height="{height}"/><text class="lane-label" x="{}" y="{}">{}</text>"#,
            esc(id),
            WIDTH - LEFT - RIGHT,
            LEFT - 8.0,
            top + height / 2.0 + 4.0,
            esc(label)
        );
        self.y += height + GAP;
        top
    }

    pub(super) fn end_lane(&mut self) {
        self.body.push_str("</g>");
    }

    /// A span from `(from, to)` ms, `top` to `top + h`, filled with `fill` unless the class
    /// colours it.
    pub(super) fn rect(
        &mut self,
        class: &str,
        (from, to): (u64, u64),
        top: f64,
        h: f64,
        fill: &str,
        title: &str,
    ) {
        let (x0, x1) = (self.scale.x(from), self.scale.x(to));
        let style = if fill.is_empty() {
            String::new()
        } else {
            format!(r#" style="fill:{fill}""#)
        };
        let _ = write!(
            self.body,
            r#"<rect class="{class}" x="{x0:.1}" y="{top:.1}" width="{:.1}" height="{h:.1}"{style}><title>{}</title></rect>"#,
            (x1 - x0).max(1.0),
            esc(title)
        );
    }

    /// Text inside a span when the span is wide enough for it.
    pub(super) fn span_text(&mut self, from: u64, to: u64, top: f64, text: &str) {
        let (x0, x1) = (self.scale.x(from), self.scale.x(to));
        if x1 - x0 >= 7.0 * text.chars().count() as f64 + 6.0 {
            let _ = write!(
                self.body,
                r#"<text class="span-text" x="{:.1}" y="{:.1}">{}</text>"#,
                x0 + 4.0,
                top + LANE / 2.0 + 4.0,
                esc(text)
            );
        }
    }

    /// A line through (ms, value) in a panel from `top`, `h` high, values up to `max`; broken
    /// where two points are more than a second apart (a second with no value has no line).
    pub(super) fn line(&mut self, class: &str, points: &[(u64, u64)], top: f64, h: f64, max: u64) {
        if points.is_empty() {
            return;
        }
        let mut d = String::new();
        for run in runs(points, 1000) {
            for (i, (t, v)) in run.iter().enumerate() {
                let y = top + h - (*v.min(&max) as f64 / max.max(1) as f64) * (h - 4.0);
                let _ = write!(
                    d,
                    "{}{:.1},{:.1} ",
                    if i == 0 { "M" } else { "L" },
                    self.scale.x(*t),
                    y
                );
            }
        }
        let _ = write!(self.body, r#"<path class="{class}" d="{}"/>"#, d.trim_end());
    }

    /// The value axis of a panel: 0, half and `max`, with `unit`.
    pub(super) fn y_axis(&mut self, top: f64, h: f64, max: u64, unit: &str) {
        for v in [0, max / 2, max] {
            let y = top + h - (v as f64 / max.max(1) as f64) * (h - 4.0);
            // The top label hangs under its line, so it stays inside the panel.
            let text_y = if v == max { y + 10.0 } else { y - 2.0 };
            let _ = write!(
                self.body,
                r#"<line class="hgrid" x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}"/><text class="y-tick" x="{}" y="{text_y:.1}">{v}{unit}</text>"#,
                WIDTH - RIGHT,
                LEFT + 3.0,
            );
        }
    }

    /// A second, smaller line under a lane's name.
    pub(super) fn sub_label(&mut self, top: f64, h: f64, text: &str) {
        let _ = write!(
            self.body,
            r#"<text class="lane-sub" x="{}" y="{:.1}">{}</text>"#,
            LEFT - 8.0,
            top + h / 2.0 + 19.0,
            esc(text)
        );
    }
}

/// Points split into runs wherever two neighbours are more than `max_step` ms apart.
pub fn runs(points: &[(u64, u64)], max_step: u64) -> Vec<&[(u64, u64)]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=points.len() {
        if i == points.len() || points[i].0 - points[i - 1].0 > max_step {
            out.push(&points[start..i]);
            start = i;
        }
    }
    out.retain(|r| !r.is_empty());
    out
}
