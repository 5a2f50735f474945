include!("/tmp/plot_body.rs");
#[test]
fn render_to_tmp() {
    let out = std::path::Path::new("/tmp/pbfigs");
    let rows = scripted_rows();
    plot_figure(&figure("time", "wall_time_s"), &rows, out).unwrap();
    let mut f = figure("speedup", "wall_time_s");
    f.speedup_over = Some(SpeedupBase { variant: None, x: Some(Value::Int(1)) });
    f.log_x = true;
    plot_figure(&f, &rows, out).unwrap();
    let mut f = figure("gflops_log", "metric_gflop_per_s");
    f.log_x = true; f.log_y = true;
    plot_figure(&f, &rows, out).unwrap();
    let mut fig = figure("cat", "phase_loop_s");
    fig.x = "layout".into();
    fig.series = "threads".into();
    plot_figure(&fig, &rows, out).unwrap();
    plot_figure(&figure("single", "wall_time_s"), &rows[..1], out).unwrap();
}
