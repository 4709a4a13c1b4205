//! The time-series plot of a server under a long benchmark: its RSS and the commands it
//! processed per second, sampled once a second by bench/scale.sh, so a reader sees at a glance
//! whether memory stayed within its budget while the data grew and whether throughput held.
//!
//! Input: CSV lines `seconds,rss_kib,commands_total,phase`; commands per second is the
//! difference of `commands_total` between samples. Phase changes are marked on the time axis.

use plotters::prelude::*;

struct Sample {
    secs: f64,
    rss_mib: f64,
    commands: f64,
    phase: String,
}

fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.splitn(4, ',');
            Some(Sample {
                secs: f.next()?.trim().parse().ok()?,
                rss_mib: f.next()?.trim().parse::<f64>().ok()? / 1024.0,
                commands: f.next()?.trim().parse().ok()?,
                phase: f.next().unwrap_or("").trim().to_string(),
            })
        })
        .collect()
}

/// Draws the series in `input` into `output` (SVG).
pub fn plot(input: &str, title: &str, output: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(input).map_err(|e| format!("{input}: {e}"))?;
    let samples = parse(&text);
    if samples.len() < 2 {
        return Err(format!("{input}: fewer than two samples"));
    }
    draw(&samples, title, output).map_err(|e| format!("plot: {e}"))
}

fn draw(s: &[Sample], title: &str, output: &str) -> Result<(), Box<dyn std::error::Error>> {
    let rate: Vec<(f64, f64)> = s
        .windows(2)
        .map(|w| {
            let dt = (w[1].secs - w[0].secs).max(1e-3);
            (w[1].secs, ((w[1].commands - w[0].commands) / dt).max(0.0))
        })
        .collect();
    let t_max = s.last().map_or(1.0, |x| x.secs).max(1.0);
    let rss_max = s.iter().map(|x| x.rss_mib).fold(1.0, f64::max) * 1.15;
    let rate_max = rate.iter().map(|x| x.1).fold(1.0, f64::max) * 1.15;

    let root = SVGBackend::new(output, (1200, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(350);
    let panels = [
        (
            top,
            "RSS (MiB)",
            rss_max,
            s.iter().map(|x| (x.secs, x.rss_mib)).collect::<Vec<_>>(),
        ),
        (bottom, "commands/s", rate_max, rate),
    ];
    for (i, (area, what, y_max, points)) in panels.into_iter().enumerate() {
        let caption = if i == 0 {
            format!("{title}: {what}")
        } else {
            what.to_string()
        };
        let mut chart = ChartBuilder::on(&area)
            .caption(caption, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..t_max, 0f64..y_max)?;
        chart
            .configure_mesh()
            .light_line_style(RGBColor(240, 240, 240))
            .x_desc("seconds")
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()?;
        // A thin vertical line and the phase's name where the phase changes.
        let mut last = "";
        for x in s {
            if x.phase != last {
                last = &x.phase;
                chart.draw_series(LineSeries::new(
                    [(x.secs, 0.0), (x.secs, y_max)],
                    RGBColor(200, 200, 200),
                ))?;
                if i == 0 {
                    chart.draw_series([Text::new(
                        x.phase.chars().take(28).collect::<String>(),
                        (x.secs, y_max * 0.97),
                        ("sans-serif", 10).into_font(),
                    )])?;
                }
            }
        }
        chart.draw_series(LineSeries::new(
            points,
            RGBColor(31, 119, 180).stroke_width(2),
        ))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_samples_and_skips_broken_lines() {
        let s = parse("0.0,1024,0,load\n1.0,2048,500,load\nbroken\n2.0,3072,1500,measure\n");
        assert_eq!(s.len(), 3);
        assert_eq!(s[1].rss_mib, 2.0);
        assert_eq!(s[2].phase, "measure");
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("p.svg");
        draw(&s, "t", out.to_str().unwrap()).unwrap();
        let svg = std::fs::read_to_string(out).unwrap();
        assert!(svg.contains("commands/s") && svg.contains("measure"));
    }
}
