//! Local kernels against the dense reference, on awkward shapes, sequential and parallel.

use fusedmm::kernels::{self, whole};
use fusedmm::reference;
use fusedmm::{Csr, Dense, Par, Transposed};
use parbench_common::Rng;

/// Relative tolerance against the bound `sum |terms|` of each entry.
const REL: f64 = 1e-12;

/// Asserts `|actual - expected| <= REL * bound` entry-wise, printing both on failure.
fn assert_close(what: &str, actual: &[f64], expected: &[f64], bound: &[f64]) {
    assert_eq!(actual.len(), expected.len(), "{what}: lengths differ");
    for (k, ((&a, &e), &b)) in actual.iter().zip(expected).zip(bound).enumerate() {
        let tol = REL * b.max(f64::MIN_POSITIVE);
        assert!(
            (a - e).abs() <= tol,
            "{what}: entry {k}: expected {e:e}, actual {a:e}, |diff| {:e} > tol {tol:e}",
            (a - e).abs()
        );
    }
}

/// A random `m x n` sparse matrix with density about `density`, row 0 empty when `m > 1`, the
/// last row full when `n` is small, values in [-1, 1).
fn awkward_sparse(m: usize, n: usize, density: f64, seed: u64) -> Csr {
    let mut rng = Rng::new(seed);
    let mut t = Vec::new();
    for i in 0..m {
        if i == 0 && m > 1 {
            continue;
        }
        for j in 0..n {
            let full = i == m - 1 && n <= 8;
            if full || rng.next_f64() < density {
                t.push((i, j, 2.0 * rng.next_f64() - 1.0));
            }
        }
    }
    Csr::from_triplets(m, n, &t).unwrap()
}

fn shapes() -> Vec<(usize, usize, usize, f64)> {
    // (m, n, r, density)
    vec![
        (1, 1, 1, 1.0),
        (1, 7, 3, 0.5),
        (7, 1, 16, 0.6),
        (13, 17, 3, 0.3),
        (31, 29, 16, 0.2),
        (53, 41, 1, 0.15),
        (97, 89, 17, 0.08),
        (5, 4, 3, 0.0),
    ]
}

fn pars() -> [Par; 3] {
    [Par::Seq, Par::Rayon(2), Par::Rayon(3)]
}

#[test]
fn every_kernel_matches_the_dense_reference_on_awkward_shapes() {
    for (case, &(m, n, r, density)) in shapes().iter().enumerate() {
        let seed = case as u64;
        let s = awkward_sparse(m, n, density, seed);
        let a = Dense::random(m, r, seed + 100);
        let b = Dense::random(n, r, seed + 200);
        let (sa, aa, ba) = (reference::abs_csr(&s), a.abs(), b.abs());
        for par in pars() {
            let what = |k: &str| format!("{k} m={m} n={n} r={r} density={density} {par:?}");

            let got = whole::sddmm(&s, &a, &b, par).unwrap();
            assert_eq!(got.indices(), s.indices());
            assert_close(
                &what("sddmm"),
                got.values(),
                &reference::sddmm(&s, &a, &b),
                &reference::sddmm(&sa, &aa, &ba),
            );
            assert_close(
                &what("spmma"),
                whole::spmm_a(&s, &b, par).data(),
                reference::spmm_a(&s, &b).data(),
                reference::spmm_a(&sa, &ba).data(),
            );
            assert_close(
                &what("spmmb"),
                whole::spmm_b(&s, &a, par).data(),
                reference::spmm_b(&s, &a).data(),
                reference::spmm_b(&sa, &aa).data(),
            );
            assert_close(
                &what("fusedmma"),
                whole::fusedmm_a(&s, &a, &b, par).data(),
                reference::fusedmm_a(&s, &a, &b).data(),
                reference::fusedmm_a(&sa, &aa, &ba).data(),
            );
            assert_close(
                &what("fusedmmb"),
                whole::fusedmm_b(&s, &a, &b, par).data(),
                reference::fusedmm_b(&s, &a, &b).data(),
                reference::fusedmm_b(&sa, &aa, &ba).data(),
            );
        }
    }
}

#[test]
fn kernels_accumulate_into_their_output() {
    let s = awkward_sparse(11, 13, 0.3, 9);
    let a = Dense::random(11, 5, 1);
    let b = Dense::random(13, 5, 2);
    let start = Dense::random(11, 5, 3);
    let mut out = start.clone();
    kernels::spmm_a((&s).into(), &b, &mut out, Par::Rayon(2));
    let fresh = whole::spmm_a(&s, &b, Par::Seq);
    for k in 0..out.data().len() {
        let expected = start.data()[k] + fresh.data()[k];
        assert!((out.data()[k] - expected).abs() <= 1e-14 * (1.0 + expected.abs()));
    }
    let mut out = start.clone();
    kernels::fusedmm_a((&s).into(), &a, &b, &mut out, Par::Seq);
    let fresh = whole::fusedmm_a(&s, &a, &b, Par::Seq);
    for k in 0..out.data().len() {
        let expected = start.data()[k] + fresh.data()[k];
        assert!((out.data()[k] - expected).abs() <= 1e-14 * (1.0 + expected.abs()));
    }
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let s = awkward_sparse(101, 97, 0.1, 4);
    let a = Dense::random(101, 16, 5);
    let b = Dense::random(97, 16, 6);
    let seq = whole::fusedmm_b(&s, &a, &b, Par::Seq);
    for t in [2, 3, 7] {
        assert_eq!(
            whole::fusedmm_b(&s, &a, &b, Par::Rayon(t)),
            seq,
            "threads {t}"
        );
        assert_eq!(
            whole::sddmm(&s, &a, &b, Par::Rayon(t)).unwrap(),
            whole::sddmm(&s, &a, &b, Par::Seq).unwrap()
        );
    }
}

#[test]
fn transposed_copy_maps_values_back_to_the_original_order() {
    let s = awkward_sparse(23, 19, 0.25, 7);
    let tr = Transposed::new(&s);
    assert_eq!(tr.t, s.transpose());
    let doubled: Vec<f64> = s.values().iter().map(|v| 2.0 * v).collect();
    let expected: Vec<f64> = tr.t.values().iter().map(|v| 2.0 * v).collect();
    assert_eq!(tr.gather_values(&doubled), expected);
}

#[test]
fn flop_counts_follow_the_convention() {
    use fusedmm::Kernel;
    assert_eq!(fusedmm::flops(Kernel::Sddmm, 10, 8), 160.0);
    assert_eq!(fusedmm::flops(Kernel::SpmmB, 10, 8), 160.0);
    assert_eq!(fusedmm::flops(Kernel::FusedMmA, 10, 8), 320.0);
    for k in Kernel::ALL {
        assert_eq!(Kernel::from_name(k.name()), Some(k));
    }
}
