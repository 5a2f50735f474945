//! The serial kernels on the whole problem: the `local` and `local-unfused` variants, the
//! reference every distributed algorithm is compared against, communicating nothing.
//!
//! - `local` ([`LOCAL`]) runs FusedMMA/B as the fused kernels of [`crate::kernels`], which never
//!   store `R = S .* (A B^T)`, over column panels of `S` ([`ColumnPanels`], cut before the
//!   clock starts, as the transpose is) where the gathered operand is larger than
//!   [`kernels::PANEL_BYTES`];
//! - `local-unfused` ([`LOCAL_UNFUSED`]) runs them as two calls, an SDDMM storing `R`, then the
//!   SpMM reading it. The other kernels are the same in both.
//! - `local-autovec` ([`LOCAL_AUTOVEC`]) is `local` as issue 14 found it: SDDMM and the fused
//!   kernels compiled as [`Codegen::Autovec`], no panels; so the tuning is measured in the same
//!   run against what it replaced. Its outputs equal `local`'s to rounding, bit for bit where
//!   `local` runs one panel.
//!
//! A-side kernels run on `S`; B-side kernels on `S^T`, built first and not timed (the
//! applications and the distributed algorithms build it once and keep it), using
//! `SpMMB(R, A) = SpMMA(R^T, A)` and `R^T = S^T .* (B A^T)` (an SDDMM on the transpose with the
//! dense inputs swapped), so fused and unfused read the same matrix. Cost: the kernel's
//! `O(nnz r)` flops (see [`crate::flops`]), plus `O(nnz)` for the transpose of a B-side kernel.

use crate::kernels::{self, whole, Codegen, ColumnPanels, CsrRef, Kernel};
use crate::problem::{FusedMmError, KernelOutput, Problem};
use crate::Dense;
use parbench_common::Par;
use std::time::Instant;

/// The serial-kernel variant (the equivalence reference), fused kernels for FusedMMA/B.
pub const LOCAL: &str = "local";
/// The serial kernels with FusedMMA/B run as SDDMM then SpMM, storing `R`.
pub const LOCAL_UNFUSED: &str = "local-unfused";
/// The fused serial kernels compiled as [`Codegen::Autovec`].
pub const LOCAL_AUTOVEC: &str = "local-autovec";

/// The serial kernel on the whole problem (B-side kernels transpose `S` inside the call).
pub fn local_kernel(
    problem: &Problem,
    kernel: Kernel,
    par: Par,
) -> Result<KernelOutput, FusedMmError> {
    let (s, a, b) = (problem.s(), problem.a(), problem.b());
    Ok(match kernel {
        Kernel::Sddmm => KernelOutput::Sparse(whole::sddmm(s, a, b, par)?),
        Kernel::SpmmA => KernelOutput::Dense(whole::spmm_a(s, b, par)),
        Kernel::SpmmB => KernelOutput::Dense(whole::spmm_b(s, a, par)),
        Kernel::FusedMmA => KernelOutput::Dense(whole::fusedmm_a(s, a, b, par)),
        Kernel::FusedMmB => KernelOutput::Dense(whole::fusedmm_b(s, a, b, par)),
    })
}

/// The serial kernel on the whole problem, timed without the transpose of a B-side kernel
/// (`fused: false` runs FusedMMA/B as SDDMM then SpMM, storing `R`): the output and the seconds
/// in the kernels (their outputs' allocation included). An SDDMM output is in the order of `S`.
/// `codegen` says how SDDMM and the fused kernels are compiled.
pub fn timed_local_kernel(
    problem: &Problem,
    kernel: Kernel,
    fused: bool,
    codegen: Codegen,
    par: Par,
) -> Result<(KernelOutput, f64), FusedMmError> {
    let (s, a, b) = (problem.s(), problem.a(), problem.b());
    let r = problem.r();
    // Runs `f`, timing it.
    fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
        let start = Instant::now();
        let out = f();
        (out, start.elapsed().as_secs_f64())
    }
    let (out, seconds) = match kernel {
        Kernel::Sddmm => {
            let (values, seconds) = timed(|| {
                let mut values = vec![0.0; s.nnz()];
                kernels::sddmm_with(codegen, s.into(), a, b, &mut values, par);
                values
            });
            return Ok((
                KernelOutput::Sparse(whole::with_values(s, values)?),
                seconds,
            ));
        }
        Kernel::SpmmA => timed(|| {
            let mut out = Dense::zeros(s.nrows(), r);
            kernels::spmm_a(s.into(), b, &mut out, par);
            out
        }),
        Kernel::FusedMmA if fused => {
            // Cut before the clock starts, as a caller that runs the kernel again keeps them.
            let panels = (codegen == Codegen::Tuned)
                .then(|| ColumnPanels::new(s.into(), r))
                .flatten();
            timed(|| {
                let mut out = Dense::zeros(s.nrows(), r);
                match &panels {
                    Some(panels) => kernels::fusedmm_a_panels(panels, a, b, &mut out, par),
                    None => kernels::fusedmm_a_with(codegen, s.into(), a, b, &mut out, par),
                }
                out
            })
        }
        Kernel::FusedMmA => timed(|| {
            let mut values = vec![0.0; s.nnz()];
            kernels::sddmm_with(codegen, s.into(), a, b, &mut values, par);
            let mut out = Dense::zeros(s.nrows(), r);
            let rr: CsrRef = s.into();
            kernels::spmm_a(rr.with_values(&values), b, &mut out, par);
            out
        }),
        Kernel::SpmmB | Kernel::FusedMmB => {
            // Built before the clock starts, as the callers that run B-side kernels keep it.
            let st = s.transpose();
            let panels = (kernel == Kernel::FusedMmB && fused && codegen == Codegen::Tuned)
                .then(|| ColumnPanels::new((&st).into(), r))
                .flatten();
            timed(|| {
                let mut out = Dense::zeros(s.ncols(), r);
                if kernel == Kernel::SpmmB {
                    kernels::spmm_b((&st).into(), a, &mut out, par);
                } else if let Some(panels) = &panels {
                    kernels::fusedmm_b_panels(panels, a, b, &mut out, par);
                } else if fused {
                    kernels::fusedmm_b_with(codegen, (&st).into(), a, b, &mut out, par);
                } else {
                    let mut values = vec![0.0; st.nnz()];
                    kernels::sddmm_with(codegen, (&st).into(), b, a, &mut values, par);
                    let rt: CsrRef = (&st).into();
                    kernels::spmm_b(rt.with_values(&values), a, &mut out, par);
                }
                out
            })
        }
    };
    Ok((KernelOutput::Dense(out), seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::erdos_renyi;

    /// At r = 512 a panel covers 1024 columns of `B`, so 2100 columns make three panels:
    /// `local` sums over them and agrees with the kernels as found to rounding.
    #[test]
    fn paneled_fused_kernels_agree_with_the_kernels_as_found() {
        let (n, r) = (2100, 512);
        assert_eq!(
            ColumnPanels::new((&erdos_renyi(4, n, 2, 1, Par::Seq).unwrap()).into(), r)
                .map(|p| p.len()),
            Some(3)
        );
        let s = erdos_renyi(n, n, 3, 9, Par::Seq).unwrap();
        let problem = Problem::new(s, Dense::random(n, r, 4), Dense::random(n, r, 5)).unwrap();
        for kernel in [Kernel::FusedMmA, Kernel::FusedMmB] {
            let run = |codegen| {
                timed_local_kernel(&problem, kernel, true, codegen, Par::threads(2))
                    .unwrap()
                    .0
                    .flatten()
            };
            let (tuned, found) = (run(Codegen::Tuned), run(Codegen::Autovec));
            let scale = found.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            assert!(scale > 0.0);
            for (t, f) in tuned.iter().zip(&found) {
                assert!((t - f).abs() <= 1e-12 * scale, "{kernel:?}: {t} vs {f}");
            }
        }
    }

    #[test]
    fn fused_and_unfused_local_kernels_agree_with_the_whole_matrix_kernels() {
        let s = erdos_renyi(37, 29, 5, 3, Par::Seq).unwrap();
        let problem = Problem::new(s, Dense::random(37, 7, 4), Dense::random(29, 7, 5)).unwrap();
        for kernel in Kernel::ALL {
            let want = local_kernel(&problem, kernel, Par::Seq).unwrap().flatten();
            let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            assert!(scale > 0.0, "{kernel:?}");
            for fused in [true, false] {
                for par in [Par::Seq, Par::threads(3)] {
                    let (out, seconds) =
                        timed_local_kernel(&problem, kernel, fused, Codegen::Tuned, par).unwrap();
                    assert!(seconds >= 0.0);
                    let got = out.flatten();
                    assert_eq!(got.len(), want.len(), "{kernel:?}");
                    for (g, w) in got.iter().zip(&want) {
                        assert!((g - w).abs() <= 1e-12 * scale, "{kernel:?} fused={fused}");
                    }
                }
            }
        }
    }
}
