//! Line charts of the scaling curves, written as SVG with `plotters`.
//!
//! Every chart has a logarithmic x axis (objects or clients grow by
//! decades) and a linear y axis from 0, so that a straight rising line reads
//! as "cost grows with the logarithm", a curve bending up as "faster than
//! that".

use std::path::Path;

use plotters::prelude::*;

/// One named series of (x, y) points.
pub(crate) struct Series {
    /// Legend text.
    pub(crate) name: String,
    /// The points; NaN values are left out.
    pub(crate) points: Vec<(f64, f64)>,
}

/// What a chart shows.
pub(crate) struct Chart<'a> {
    /// Caption.
    pub(crate) title: &'a str,
    /// x axis description.
    pub(crate) x_desc: &'a str,
    /// y axis description.
    pub(crate) y_desc: &'a str,
    /// The series (at most six colours; more reuse them).
    pub(crate) series: Vec<Series>,
}

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(23, 190, 207),
];

/// Writes `chart` as an SVG of 720 × 420 pixels to `path`.
pub(crate) fn write_svg(path: &Path, chart: &Chart<'_>) -> anyhow::Result<()> {
    let points = || {
        chart
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|(x, y)| x.is_finite() && y.is_finite() && *x > 0.0)
    };
    let (mut x_min, mut x_max, mut y_max) = (f64::MAX, f64::MIN, 0.0f64);
    for (x, y) in points() {
        x_min = x_min.min(*x);
        x_max = x_max.max(*x);
        y_max = y_max.max(*y);
    }
    anyhow::ensure!(x_min <= x_max, "chart {:?} has no points", chart.title);
    // The x labels: exactly the measured x values.
    let mut keys: Vec<f64> = points().map(|(x, _)| *x).collect();
    keys.sort_by(f64::total_cmp);
    keys.dedup();
    // A decade's margin on neither side: a little room around the points.
    let x_range = (x_min / 1.5)..(x_max * 1.5);
    let y_range = 0.0..(if y_max > 0.0 { y_max * 1.15 } else { 1.0 });

    let root = SVGBackend::new(path, (720, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut ctx = ChartBuilder::on(&root)
        .caption(chart.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x_range.log_scale().with_key_points(keys), y_range)?;
    ctx.configure_mesh()
        .x_desc(chart.x_desc)
        .y_desc(chart.y_desc)
        .x_label_formatter(&|x| short_number(*x))
        .y_label_formatter(&|y| short_number(*y))
        .draw()?;
    for (i, series) in chart.series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let pts: Vec<(f64, f64)> = series
            .points
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite() && *x > 0.0)
            .collect();
        ctx.draw_series(LineSeries::new(pts.clone(), colour.stroke_width(2)))?
            .label(series.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour));
        ctx.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, colour.filled())))?;
    }
    ctx.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// 1500 → "1.5k", 2000000 → "2M", 0.25 → "0.25".
pub(crate) fn short_number(x: f64) -> String {
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    let a = x.abs();
    if a >= 1e6 {
        format!("{}M", trim(format!("{:.1}", x / 1e6)))
    } else if a >= 1e3 {
        format!("{}k", trim(format!("{:.1}", x / 1e3)))
    } else if a >= 10.0 || a == 0.0 {
        format!("{x:.0}")
    } else {
        trim(format!("{x:.2}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_numbers() {
        assert_eq!(short_number(1500.0), "1.5k");
        assert_eq!(short_number(1_000_000.0), "1M");
        assert_eq!(short_number(250.0), "250");
        assert_eq!(short_number(0.25), "0.25");
        assert_eq!(short_number(0.0), "0");
        assert_eq!(short_number(2.0), "2");
    }

    #[test]
    fn writes_an_svg_with_every_series() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("c.svg");
        write_svg(
            &path,
            &Chart {
                title: "GET",
                x_desc: "objects",
                y_desc: "req/s",
                series: vec![
                    Series {
                        name: "apiforge".into(),
                        points: vec![(1e3, 10.0), (1e4, 9.0), (1e5, f64::NAN)],
                    },
                    Series {
                        name: "other".into(),
                        points: vec![(1e3, 5.0), (1e4, 4.0)],
                    },
                ],
            },
        )?;
        let svg = std::fs::read_to_string(&path)?;
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        assert!(svg.contains("apiforge") && svg.contains("other"));
        Ok(())
    }

    #[test]
    fn a_chart_without_points_is_an_error() {
        let dir = tempfile::tempdir().ok();
        let path = dir.as_ref().map(|d| d.path().join("e.svg"));
        let chart = Chart {
            title: "empty",
            x_desc: "x",
            y_desc: "y",
            series: vec![],
        };
        assert!(path.is_some_and(|p| write_svg(&p, &chart).is_err()));
    }
}
