//! Generators, permutations and MatrixMarket files.

use fusedmm::generate::{
    circulant, circulant_period, erdos_renyi, permute, random_permutation, rmat, GenerateError,
    RmatSpec,
};
use fusedmm::mtx::{self, MatrixFile, MtxError};
use fusedmm::{Csr, Dense, Par};

#[test]
fn erdos_renyi_rows_have_exactly_the_requested_distinct_columns() {
    let s = erdos_renyi(200, 37, 5, 11, Par::Seq).unwrap();
    assert_eq!(s.nnz(), 200 * 5);
    for i in 0..200 {
        let (cols, vals) = s.row(i);
        assert_eq!(cols.len(), 5, "row {i}");
        assert!(cols.windows(2).all(|w| w[0] < w[1]));
        assert!(vals.iter().all(|&v| v > 0.0 && v <= 1.0));
    }
    // Full rows and empty rows are edge cases of the sampler.
    let full = erdos_renyi(3, 4, 4, 1, Par::Seq).unwrap();
    assert_eq!(full.nnz(), 12);
    assert_eq!(erdos_renyi(3, 4, 0, 1, Par::Seq).unwrap().nnz(), 0);
}

#[test]
fn erdos_renyi_is_seeded_and_independent_of_threads() {
    let a = erdos_renyi(500, 400, 8, 3, Par::Seq).unwrap();
    assert_eq!(a, erdos_renyi(500, 400, 8, 3, Par::Rayon(3)).unwrap());
    assert_ne!(a, erdos_renyi(500, 400, 8, 4, Par::Seq).unwrap());
}

#[test]
fn erdos_renyi_columns_are_roughly_uniform() {
    let s = erdos_renyi(4000, 50, 10, 5, Par::Seq).unwrap();
    let mut counts = vec![0usize; 50];
    for &c in s.indices() {
        counts[c as usize] += 1;
    }
    // Expected 800 per column, standard deviation about 26.
    for (c, &k) in counts.iter().enumerate() {
        assert!((650..=950).contains(&k), "column {c} has {k} nonzeros");
    }
}

#[test]
fn erdos_renyi_rejects_more_nonzeros_than_columns() {
    assert_eq!(
        erdos_renyi(3, 4, 5, 1, Par::Seq),
        Err(GenerateError::TooManyPerRow {
            per_row: 5,
            cols: 4
        })
    );
}

#[test]
fn rmat_is_seeded_merges_duplicates_and_is_skewed() {
    let spec = RmatSpec::new(10, 8, 7);
    let s = rmat(&spec).unwrap();
    assert_eq!(s, rmat(&spec).unwrap());
    assert_eq!((s.nrows(), s.ncols()), (1024, 1024));
    // Duplicates merged: fewer distinct entries than edges, and every row sorted and unique
    // (checked by Csr::new).
    assert!(s.nnz() < 1024 * 8 && s.nnz() > 1024 * 4, "nnz {}", s.nnz());
    let max_row = (0..1024).map(|i| s.row(i).0.len()).max().unwrap();
    assert!(
        max_row > 10 * 8,
        "max row degree {max_row} is not heavy-tailed"
    );
    // Quadrant a is the most likely: row 0 is among the heaviest.
    assert!(s.row(0).0.len() >= max_row / 2);
}

#[test]
fn rmat_rejects_bad_probabilities() {
    let mut spec = RmatSpec::new(4, 2, 1);
    spec.a = 0.9;
    assert!(matches!(
        rmat(&spec),
        Err(GenerateError::BadProbabilities { .. })
    ));
    assert_eq!(
        rmat(&RmatSpec::new(40, 1, 1)),
        Err(GenerateError::ScaleTooLarge(40))
    );
}

#[test]
fn permutations_are_bijections_and_permute_round_trips() {
    let p = random_permutation(97, 3);
    let mut sorted = p.clone();
    sorted.sort();
    assert_eq!(sorted, (0..97).collect::<Vec<u32>>());
    assert_ne!(p, (0..97).collect::<Vec<u32>>());
    assert_eq!(p, random_permutation(97, 3));

    let s = erdos_renyi(97, 61, 4, 2, Par::Seq).unwrap();
    let (rp, cp) = (random_permutation(97, 5), random_permutation(61, 6));
    let t = permute(&s, &rp, &cp).unwrap();
    assert_eq!(t.nnz(), s.nnz());
    let inverse = |p: &[u32]| {
        let mut inv = vec![0u32; p.len()];
        for (i, &x) in p.iter().enumerate() {
            inv[x as usize] = i as u32;
        }
        inv
    };
    assert_eq!(permute(&t, &inverse(&rp), &inverse(&cp)).unwrap(), s);
    // Entry (i, j) moved to (rp[i], cp[j]), with its value.
    let (cols, vals) = s.row(4);
    let (tc, tv) = t.row(rp[4] as usize);
    let k = tc.iter().position(|&c| c == cp[cols[0] as usize]).unwrap();
    assert_eq!(tv[k], vals[0]);
    // Dense rows follow the same permutation.
    let a = Dense::random(97, 3, 1);
    let pa = a.permute_rows(&rp);
    assert_eq!(pa.row(rp[10] as usize), a.row(10));
}

fn read(text: &str) -> Result<MatrixFile, MtxError> {
    mtx::read_matrix(text.as_bytes())
}

#[test]
fn coordinate_files_round_trip_exactly() {
    let s = erdos_renyi(23, 17, 3, 9, Par::Seq).unwrap();
    let mut buf = Vec::new();
    mtx::write_coordinate(&mut buf, &s).unwrap();
    assert_eq!(mtx::read_sparse(&buf[..]).unwrap(), s);
}

#[test]
fn array_files_are_column_major_and_round_trip_exactly() {
    let d = Dense::random(5, 3, 2);
    let mut buf = Vec::new();
    mtx::write_array(&mut buf, &d).unwrap();
    let text = String::from_utf8(buf.clone()).unwrap();
    let second_value: f64 = text.lines().nth(3).unwrap().parse().unwrap();
    assert_eq!(second_value, d.get(1, 0), "array files are column-major");
    assert_eq!(mtx::read_dense(&buf[..]).unwrap(), d);
    let m =
        mtx::read_dense("%%MatrixMarket matrix array integer general\n2 2\n1\n2\n3 4\n".as_bytes())
            .unwrap();
    assert_eq!(m.data(), &[1.0, 3.0, 2.0, 4.0]);
}

#[test]
fn symmetric_pattern_and_integer_files_expand() {
    let text =
        "%%MatrixMarket matrix coordinate pattern symmetric\n% a comment\n\n3 3 3\n1 1\n3 1\n3 2\n";
    let MatrixFile::Sparse(s) = read(text).unwrap() else {
        panic!("expected sparse")
    };
    assert_eq!(
        s.to_dense(),
        vec![1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    );
    let skew = "%%MatrixMarket matrix coordinate integer skew-symmetric\n2 2 1\n2 1 5\n";
    let MatrixFile::Sparse(s) = read(skew).unwrap() else {
        panic!("expected sparse")
    };
    assert_eq!(s.to_dense(), vec![0.0, -5.0, 5.0, 0.0]);
    let sym_array = "%%MatrixMarket matrix array real symmetric\n2 2\n1\n2\n3\n";
    let MatrixFile::Dense(d) = read(sym_array).unwrap() else {
        panic!("expected dense")
    };
    assert_eq!(d.data(), &[1.0, 2.0, 2.0, 3.0]);
    // Header words are case-insensitive; duplicates in general files are summed.
    let dup = "%%MatrixMarket Matrix Coordinate Real General\n1 2 2\n1 2 1.5\n1 2 2.5\n";
    let MatrixFile::Sparse(s) = read(dup).unwrap() else {
        panic!("expected sparse")
    };
    assert_eq!(s.values(), &[4.0]);
}

#[test]
fn malformed_files_report_the_line() {
    let err = |text: &str| read(text).unwrap_err();
    assert!(matches!(err("hello\n"), MtxError::MissingHeader));
    assert!(matches!(
        err("%%MatrixMarket matrix coordinate complex general\n1 1 1\n"),
        MtxError::Unsupported { line: 1, .. }
    ));
    assert!(matches!(
        err("%%MatrixMarket matrix coordinate real hermitian\n1 1 1\n"),
        MtxError::Unsupported { line: 1, .. }
    ));
    assert!(matches!(
        err("%%MatrixMarket matrix coordinate real general\n%c\n3 x 1\n"),
        MtxError::BadSize { line: 3, .. }
    ));
    assert!(matches!(
        err("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n%c\n4 1 2.0\n"),
        MtxError::IndexOutOfRange {
            line: 5,
            row: 4,
            col: 1,
            ..
        }
    ));
    assert!(matches!(
        err("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n0 1 2.0\n"),
        MtxError::IndexOutOfRange { line: 4, .. }
    ));
    assert!(matches!(
        err("%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 abc\n"),
        MtxError::BadEntry { line: 3, .. }
    ));
    assert!(matches!(
        err("%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1\n"),
        MtxError::BadEntry { line: 3, .. }
    ));
    assert!(matches!(
        err("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n"),
        MtxError::Truncated {
            expected: 2,
            got: 1,
            ..
        }
    ));
    assert!(matches!(
        err("%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 1\n2 2 2\n"),
        MtxError::TooManyEntries { line: 4, .. }
    ));
    assert!(matches!(
        err("%%MatrixMarket matrix array real general\n2 1\n1\n2\n3\n"),
        MtxError::TooManyEntries { line: 5, .. }
    ));
    assert!(matches!(
        err("%%MatrixMarket matrix coordinate real symmetric\n2 3 0\n"),
        MtxError::BadSize { line: 2, .. }
    ));
    // The message names the line.
    let msg = err("%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 nan\n").to_string();
    assert!(msg.starts_with("line 3:"), "{msg}");
    assert!(matches!(
        mtx::read_dense("%%MatrixMarket matrix coordinate real general\n1 1 0\n".as_bytes()),
        Err(MtxError::WrongFormat { .. })
    ));
}

#[test]
fn csr_built_from_a_file_is_usable_by_the_kernels() {
    let text = "%%MatrixMarket matrix coordinate real general\n2 3 3\n1 1 2\n2 3 -1\n1 2 0.5\n";
    let s: Csr = mtx::read_sparse(text.as_bytes()).unwrap();
    let a = Dense::from_vec(2, 1, vec![1.0, 2.0]).unwrap();
    let b = Dense::from_vec(3, 1, vec![3.0, 4.0, 5.0]).unwrap();
    let r = fusedmm::kernels::whole::sddmm(&s, &a, &b, Par::Seq).unwrap();
    assert_eq!(r.values(), &[6.0, 2.0, -10.0]);
}

#[test]
fn circulant_pattern_has_fixed_nonzeros_per_row_and_column() {
    let s = circulant(12, 12, 3, 7).unwrap();
    assert_eq!(s.nnz(), 36);
    for i in 0..12 {
        let (cols, vals) = s.row(i);
        assert_eq!(cols.len(), 3);
        assert!(cols.iter().all(|&j| (i + j as usize).is_multiple_of(4)));
        assert!(vals.iter().all(|&v| v > 0.0 && v <= 1.0));
    }
    assert_eq!(circulant(12, 12, 3, 7).unwrap(), s, "seeded");
    assert_eq!(circulant_period(12, 3), Ok(4));
    let err = circulant(12, 12, 5, 7).unwrap_err();
    assert_eq!(
        err,
        GenerateError::CirculantPeriod {
            per_row: 5,
            cols: 12
        }
    );
    assert_eq!(
        err.to_string(),
        "the circulant generator needs nnz_per_row to divide cols (5 does not divide 12)"
    );
    assert!(circulant_period(12, 0).is_err());
}
