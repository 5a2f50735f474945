//! The SGNS loss and update written from the definition, in `f64`, with none of the variants'
//! machinery (no tables, no blocking, no shared matrices), for the tests.
//!
//! For a context word `c` and targets `t_0` (label 1) and `t_1..t_K` (label 0) the loss is
//! `L = -log sigmoid(<in[c], out[t_0]>) - sum_k log sigmoid(-<in[c], out[t_k]>)`, and one SGD
//! step of rate `alpha` is the update: for each target in turn, `f = <in[c], out[t]>`,
//! `g = alpha (label - sigmoid(f))`, `e += g out[t]`, `out[t] += g in[c]`; then `in[c] += e`.
//! With distinct targets that is exactly `-alpha` times the gradient of `L`.

/// `1 / (1 + exp(-x))`.
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn row(m: &[f32], dim: usize, r: u32) -> Vec<f64> {
    m[r as usize * dim..(r as usize + 1) * dim]
        .iter()
        .map(|&v| v as f64)
        .collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The negative-sampling loss of one context word against its targets (`targets[0]` positive).
pub fn sgns_loss(input: &[f32], output: &[f32], dim: usize, context: u32, targets: &[u32]) -> f64 {
    let c = row(input, dim, context);
    targets
        .iter()
        .enumerate()
        .map(|(k, &t)| {
            let f = dot(&c, &row(output, dim, t));
            if k == 0 {
                -sigmoid(f).ln()
            } else {
                -sigmoid(-f).ln()
            }
        })
        .sum()
}

/// One SGD step of the pair (`context`, `targets`), in `f64`, stored back as `f32`.
pub fn pair_update(
    input: &mut [f32],
    output: &mut [f32],
    dim: usize,
    context: u32,
    targets: &[u32],
    alpha: f64,
) {
    let c = row(input, dim, context);
    let mut e = vec![0.0; dim];
    for (k, &t) in targets.iter().enumerate() {
        let label = if k == 0 { 1.0 } else { 0.0 };
        let o = row(output, dim, t);
        let g = alpha * (label - sigmoid(dot(&c, &o)));
        for j in 0..dim {
            e[j] += g * o[j];
            output[t as usize * dim + j] = (o[j] + g * c[j]) as f32;
        }
    }
    for j in 0..dim {
        input[context as usize * dim + j] = (c[j] + e[j]) as f32;
    }
}

/// Cosine similarity in `f64`.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let a: Vec<f64> = a.iter().map(|&x| x as f64).collect();
    let b: Vec<f64> = b.iter().map(|&x| x as f64).collect();
    dot(&a, &b) / (dot(&a, &a).sqrt() * dot(&b, &b).sqrt())
}
