//! Bad input gives errors, never panics.

use anyspec_cpu_kernels::{Error, Matrix, Threads, WeightFormat, dequantize, quantize};

fn q4_1(rows: usize, cols: usize) -> Matrix {
    let w = vec![0.5f32; rows * cols];
    Matrix::from_bytes(WeightFormat::Q4_1, rows, cols, &quantize(WeightFormat::Q4_1, &w).unwrap()).unwrap()
}

#[test]
fn wrong_byte_length() {
    let err = Matrix::from_bytes(WeightFormat::Q8_0, 2, 32, &[0; 67]).unwrap_err();
    assert!(matches!(err, Error::Length { expected: 68, got: 67, .. }), "{err}");
    assert!(err.to_string().contains("67"), "{err}");
    let err = Matrix::from_f32(2, 3, &[0.0; 5]).unwrap_err();
    assert!(matches!(err, Error::Length { expected: 6, got: 5, .. }), "{err}");
    let mut out = [0.0; 32];
    assert!(matches!(dequantize(WeightFormat::Q4_0, &[0; 17], &mut out), Err(Error::Length { .. })));
    let mut out = [0.0; 33];
    assert!(matches!(dequantize(WeightFormat::Q4_0, &[0; 18], &mut out), Err(Error::NotMultiple { .. })));
}

#[test]
fn cols_not_a_multiple_of_the_block() {
    let err = Matrix::from_bytes(WeightFormat::Q4_1, 1, 48, &[0; 30]).unwrap_err();
    assert!(matches!(err, Error::NotMultiple { value: 48, multiple: 32, .. }), "{err}");
    let err = Matrix::from_bytes(WeightFormat::Q4_K, 1, 288, &[0; 162]).unwrap_err();
    assert!(matches!(err, Error::NotMultiple { value: 288, multiple: 256, .. }), "{err}");
    assert!(quantize(WeightFormat::Q8_0, &[0.0; 33]).is_err());
    let err = Matrix::from_f32(3, 0, &[]).unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "{err}");
    let err = Matrix::from_bytes(WeightFormat::F32, usize::MAX / 2, 4, &[]).unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "{err}");
}

#[test]
fn x_and_y_lengths() {
    let m = q4_1(5, 64);
    let t = Threads::new(1).unwrap();
    let mut y = vec![0.0; 10];
    let err = m.matmul(&[0.0; 100], &mut y, &t).unwrap_err();
    assert!(matches!(err, Error::NotMultiple { value: 100, multiple: 64, .. }), "{err}");
    let err = m.matmul(&[0.0; 192], &mut y, &t).unwrap_err();
    assert!(matches!(err, Error::Length { expected: 15, got: 10, .. }), "{err}");
    let err = m.matmul_rows(&[0.0; 128], &[0, 1, 2], &mut y[..5], &t).unwrap_err();
    assert!(matches!(err, Error::Length { expected: 6, got: 5, .. }), "{err}");
    // Zero activation rows and an empty selection are fine and write nothing.
    m.matmul(&[], &mut [], &t).unwrap();
    m.matmul_rows(&[0.0; 64], &[], &mut [], &t).unwrap();
}

#[test]
fn indices_out_of_range() {
    let m = q4_1(5, 64);
    let t = Threads::new(2).unwrap();
    let mut y = vec![0.0; 4];
    let err = m.matmul_rows(&[0.0; 64], &[0, 5], &mut y, &t).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { index: 5, len: 5, .. }), "{err}");
    let mut row = vec![0.0; 64];
    let err = m.row_f32(5, &mut row).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { index: 5, .. }), "{err}");
    assert!(matches!(m.row_f32(0, &mut row[..63]), Err(Error::Length { .. })));
    let bytes = quantize(WeightFormat::Q8_0, &[0.0; 64]).unwrap();
    let err = Matrix::from_bytes_permuted(WeightFormat::Q8_0, 2, 32, &bytes, &[1, 2]).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { index: 2, .. }), "{err}");
    let err = Matrix::from_bytes_permuted(WeightFormat::Q8_0, 2, 32, &bytes, &[1]).unwrap_err();
    assert!(matches!(err, Error::Length { expected: 2, got: 1, .. }), "{err}");
}

#[test]
fn zero_threads() {
    let err = Threads::new(0).unwrap_err();
    assert!(matches!(err, Error::ZeroThreads), "{err}");
}

#[test]
fn row_blocks_refuse_rows_blocks_and_ranges_out_of_range() {
    use anyspec_cpu_kernels::RowBlocks;
    let t = Threads::new(1).unwrap();
    let m = Matrix::from_f32(4, 8, &[1.0; 32]).unwrap();
    let e = RowBlocks::new(&m, vec![vec![0, 4]]).unwrap_err().to_string();
    assert!(e.contains("block row") && e.contains('4'), "{e}");
    let blocks = RowBlocks::new(&m, vec![vec![3, 1], vec![2]]).unwrap();
    let mut y = [0.0; 3];
    let e = blocks.matmul_blocks(&[1.0; 8], &[0, 2], &mut y, &t).unwrap_err().to_string();
    assert!(e.contains("block") && e.contains('2'), "{e}");
    let e = blocks.matmul_blocks(&[1.0; 8], &[0, 1], &mut y[..2], &t).unwrap_err().to_string();
    assert!(e.contains('y'), "{e}");
    blocks.matmul_blocks(&[1.0; 8], &[1, 0], &mut y, &t).unwrap();
    assert_eq!(y, [8.0; 3]);
    let e = m.matmul_ranges(&[1.0; 8], &[0..1, 0..5], &mut [0.0; 6], &t).unwrap_err().to_string();
    assert!(e.contains("range end") && e.contains('5'), "{e}");
}

#[test]
fn paired_products_refuse_runs_that_do_not_tile_the_rows_and_short_outputs() {
    let t = Threads::new(1).unwrap();
    let m = Matrix::from_f32(12, 8, &[1.0; 96]).unwrap();
    let keep = |_: &mut [f32], _: &[f32]| {};
    for run in [0, 4, 5] {
        let e = m.matmul_paired(&[1.0; 8], &mut [0.0; 6], run, &t, &keep).unwrap_err().to_string();
        assert!(e.contains("rows of a paired matrix") && e.contains("12"), "run {run}: {e}");
    }
    let e = m.matmul_paired(&[1.0; 16], &mut [0.0; 11], 3, &t, &keep).unwrap_err().to_string();
    assert!(e.contains('y') && e.contains("12") && e.contains("11"), "{e}");
    let e = m.matmul_paired(&[1.0; 7], &mut [0.0; 6], 3, &t, &keep).unwrap_err().to_string();
    assert!(e.contains("x length"), "{e}");
    m.matmul_paired(&[1.0; 16], &mut [0.0; 12], 3, &t, &keep).unwrap();
    // No rows: nothing to compute, on one thread or several.
    let empty = Matrix::from_f32(0, 8, &[]).unwrap();
    for threads in [1, 3] {
        empty.matmul_paired(&[1.0; 16], &mut [], 4, &Threads::new(threads).unwrap(), &keep).unwrap();
    }
}
