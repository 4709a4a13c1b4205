//! SVG plots of a benchmark scenario: throughput per test and side on top, and one panel per
//! test with each side's latency percentiles (log scale) below.
//!
//! The input is the suite summary the bench scripts write (bench/lib.sh `summarize`):
//!
//! ```json
//! {"title": "...", "sides": ["kvik", "redis"],
//!  "rows": [{"test": "GET -P 1", "side": "kvik", "rps": 1.0, "p50": 0.1, "p95": 0.2,
//!            "p99": 0.3, "p99_9": 0.4, "max": 0.5}]}
//! ```
//!
//! Only plotters' SVG backend is built: text is written as SVG `<text>`, so no font files or
//! freetype are needed.

use plotters::prelude::*;
use serde_json::Value;

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];
const PCTS: [(&str, &str); 5] = [
    ("p50", "p50"),
    ("p95", "p95"),
    ("p99", "p99"),
    ("p99_9", "p99.9"),
    ("max", "max"),
];

fn num(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

/// Draws `input` (a suite summary JSON file) into `output` (SVG).
pub fn plot(input: &str, output: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(input).map_err(|e| format!("{input}: {e}"))?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| format!("{input}: {e}"))?;
    let title = doc["title"].as_str().unwrap_or("benchmark").to_string();
    let sides: Vec<String> = doc["sides"]
        .as_array()
        .ok_or("summary without \"sides\"")?
        .iter()
        .filter_map(|s| s.as_str().map(String::from))
        .collect();
    let rows = doc["rows"].as_array().ok_or("summary without \"rows\"")?;
    let mut tests: Vec<String> = Vec::new();
    for r in rows {
        let t = r["test"].as_str().unwrap_or("").to_string();
        if !tests.contains(&t) {
            tests.push(t);
        }
    }
    if tests.is_empty() || sides.is_empty() {
        return Err("nothing to plot".into());
    }
    let find = |t: &str, s: &str| rows.iter().find(|r| r["test"] == t && r["side"] == s);
    draw(&title, &sides, &tests, &find, output).map_err(|e| format!("plot: {e}"))
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn draw<'a>(
    title: &str,
    sides: &[String],
    tests: &[String],
    find: &dyn Fn(&str, &str) -> Option<&'a Value>,
    output: &str,
) -> DrawResult {
    let cols = 4usize.min(tests.len());
    let panel_rows = tests.len().div_ceil(cols);
    let width = 1200u32;
    let height = 420 + 280 * panel_rows as u32;
    let root = SVGBackend::new(output, (width, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(420);

    // Throughput: grouped bars, one group per test.
    let max_rps = tests
        .iter()
        .flat_map(|t| sides.iter().filter_map(move |s| find(t, s)))
        .map(|r| num(r, "rps"))
        .fold(0.0, f64::max)
        .max(1.0);
    let mut chart = ChartBuilder::on(&top)
        .caption(
            format!("{title}: throughput (requests/s, median)"),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(20)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..tests.len() as f64, 0f64..max_rps * 1.45)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(RGBColor(245, 245, 245))
        .x_labels(0)
        .y_label_formatter(&|v| format!("{:.0}k", v / 1000.0))
        .draw()?;
    let bw = 0.8 / sides.len() as f64;
    for (j, side) in sides.iter().enumerate() {
        let color = COLORS[j % COLORS.len()];
        let bars: Vec<Rectangle<(f64, f64)>> = tests
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                find(t, side).map(|r| {
                    let x0 = i as f64 + 0.1 + j as f64 * bw;
                    Rectangle::new([(x0, 0.0), (x0 + bw * 0.95, num(r, "rps"))], color.filled())
                })
            })
            .collect();
        chart
            .draw_series(bars)?
            .label(side.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    // Test names above their groups, on two alternating heights so long names do not collide;
    // "n/a" where a side has no result (an unsupported command).
    chart.draw_series(tests.iter().enumerate().map(|(i, t)| {
        let y = max_rps * if i % 2 == 0 { 1.2 } else { 1.11 };
        Text::new(
            t.clone(),
            (i as f64 + 0.05, y),
            ("sans-serif", 12).into_font(),
        )
    }))?;
    let mut missing = Vec::new();
    for (i, t) in tests.iter().enumerate() {
        for (j, side) in sides.iter().enumerate() {
            if find(t, side).is_none() {
                let x = i as f64 + 0.1 + j as f64 * bw;
                missing.push(Text::new(
                    "n/a",
                    (x, max_rps * 0.03),
                    ("sans-serif", 11).into_font(),
                ));
            }
        }
    }
    chart.draw_series(missing)?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;

    // Latency: one panel per test, a line per side over the percentiles, log scale.
    let panels = bottom.split_evenly((panel_rows, cols));
    for (t, area) in tests.iter().zip(panels.iter()) {
        let vals: Vec<f64> = sides
            .iter()
            .filter_map(|s| find(t, s))
            .flat_map(|r| PCTS.iter().map(move |(k, _)| num(r, k)))
            .filter(|v| *v > 0.0)
            .collect();
        let lo = vals.iter().cloned().fold(f64::MAX, f64::min).min(1.0) * 0.8;
        let hi = vals.iter().cloned().fold(0.0, f64::max).max(lo * 2.0) * 1.3;
        let mut c = ChartBuilder::on(area)
            .caption(format!("{t}: latency (ms)"), ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(22)
            .y_label_area_size(50)
            .build_cartesian_2d(-0.3f64..4.3f64, (lo..hi).log_scale())?;
        c.configure_mesh()
            .light_line_style(RGBColor(245, 245, 245))
            .y_labels(6)
            .x_labels(5)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 0.01 && (0.0..=4.0).contains(&i) {
                    PCTS[i as usize].1.to_string()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|v| format!("{v:.2}"))
            .draw()?;
        for (j, side) in sides.iter().enumerate() {
            let Some(r) = find(t, side) else { continue };
            let color = COLORS[j % COLORS.len()];
            let pts: Vec<(f64, f64)> = PCTS
                .iter()
                .enumerate()
                .map(|(i, (k, _))| (i as f64, num(r, k).max(lo)))
                .collect();
            c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?;
            c.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
        }
    }
    root.present()?;
    Ok(())
}
