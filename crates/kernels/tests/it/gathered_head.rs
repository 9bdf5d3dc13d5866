//! The gathered head product: the plain-tensor reference against a host f64 sum on flex, its
//! errors, and (under the `wgpu` feature) the CubeCL kernel against the reference on wgpu.

use anyspec_kernels::readback::read_rows;
use anyspec_kernels::{Error, gathered_head, gathered_head_is_fused, gathered_head_reference};
use burn::tensor::{Device, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A random `[rows, cols]` matrix, flat row-major.
fn random(rng: &mut StdRng, rows: usize, cols: usize) -> Vec<f32> {
    (0..rows * cols).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

fn upload(flat: &[f32], rows: usize, cols: usize, device: &Device) -> Tensor<2> {
    Tensor::from_data(TensorData::new(flat.to_vec(), [rows, cols]), device)
}

/// `Σ_k hidden[i, k] · head[k, ids[j]]` in f64, and the bound `d · ε · Σ_k |…|` (ε = 2⁻²⁴) that
/// any f32 summation order stays within, up to the f32 rounding of the result itself.
fn exact(hidden: &[f32], head: &[f32], d: usize, vocab: usize, i: usize, id: u32) -> (f64, f64) {
    let terms = (0..d).map(|k| f64::from(hidden[i * d + k]) * f64::from(head[k * vocab + id as usize]));
    let (sum, magnitude) = terms.fold((0.0, 0.0), |(s, a), t| (s + t, a + t.abs()));
    (sum, (d as f64 + 1.0) * f64::from(f32::EPSILON) / 2.0 * magnitude + 1e-30)
}

/// A shortlist with repeats and the first and last ids, out of order.
fn shortlist(rng: &mut StdRng, vocab: usize, n: usize) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..n).map(|_| rng.random_range(0..vocab as u32)).collect();
    ids[0] = vocab as u32 - 1;
    ids[n / 2] = 0;
    ids[n - 1] = ids[1];
    ids
}

#[test]
fn the_reference_is_the_sum_over_the_kept_columns() {
    let device = Device::flex();
    let mut rng = StdRng::seed_from_u64(1);
    let (m, d, vocab, n) = (3, 40, 300, 37);
    let (hidden, head) = (random(&mut rng, m, d), random(&mut rng, d, vocab));
    let ids = shortlist(&mut rng, vocab, n);
    let out = gathered_head_reference(upload(&hidden, m, d, &device), upload(&head, d, vocab, &device), &ids).unwrap();
    let rows = read_rows(out).unwrap();
    assert_eq!((rows.len(), rows[0].len()), (m, n));
    for (i, row) in rows.iter().enumerate() {
        for (j, &got) in row.iter().enumerate() {
            let (want, bound) = exact(&hidden, &head, d, vocab, i, ids[j]);
            assert!((f64::from(got) - want).abs() <= bound, "({i}, {j}): {got} vs {want} (bound {bound})");
        }
    }
    // On flex the dispatcher runs the reference.
    assert!(!gathered_head_is_fused(&device));
    let again = gathered_head(upload(&hidden, m, d, &device), upload(&head, d, vocab, &device), &ids).unwrap();
    assert_eq!(read_rows(again).unwrap(), rows);
}

#[test]
fn bad_shortlists_and_shapes_are_errors_that_name_the_problem() {
    let device = Device::flex();
    let hidden = Tensor::<2>::zeros([2, 8], &device);
    let head = Tensor::<2>::zeros([8, 10], &device);
    let err = gathered_head(hidden.clone(), head.clone(), &[3, 10]).unwrap_err();
    assert!(matches!(err, Error::TokenOutOfRange { token: 10, vocab_size: 10 }), "{err}");
    let err = gathered_head(hidden.clone(), head, &[]).unwrap_err();
    assert!(err.to_string().contains("at least one id"), "{err}");
    let err = gathered_head(hidden, Tensor::<2>::zeros([7, 10], &device), &[1]).unwrap_err();
    assert!(err.to_string().contains("hidden width"), "{err}");
}

#[cfg(feature = "wgpu")]
mod on_wgpu {
    use anyspec_kernels::readback::read_rows;
    use anyspec_kernels::{gathered_head, gathered_head_fused, gathered_head_is_fused, gathered_head_reference};
    use burn::tensor::{Device, DeviceKind};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::{exact, random, shortlist, upload};

    /// The kernel against the reference and the f64 sum, with the head as `[d, V]` and as the
    /// transposed view of a `[V, d]` matrix (other strides, no copy).
    #[test]
    fn the_kernel_matches_the_reference_on_wgpu() {
        let device = Device::wgpu(DeviceKind::DefaultDevice);
        assert!(gathered_head_is_fused(&device));
        let mut rng = StdRng::seed_from_u64(2);
        for (m, d, vocab, n) in [(1, 64, 1000, 300), (6, 96, 2048, 513), (2, 33, 50, 1)] {
            let (hidden, head) = (random(&mut rng, m, d), random(&mut rng, d, vocab));
            let ids = shortlist(&mut rng, vocab, n.max(3));
            // The same head stored as [V, d], viewed as [d, V].
            let mut by_rows = vec![0.0f32; vocab * d];
            for k in 0..d {
                for v in 0..vocab {
                    by_rows[v * d + k] = head[k * vocab + v];
                }
            }
            let h = upload(&hidden, m, d, &device);
            let heads = [upload(&head, d, vocab, &device), upload(&by_rows, vocab, d, &device).transpose()];
            for (layout, w) in ["[d, V]", "[V, d] transposed"].iter().zip(heads) {
                let fused = read_rows(gathered_head_fused(h.clone(), w.clone(), &ids).unwrap()).unwrap();
                let reference = read_rows(gathered_head_reference(h.clone(), w.clone(), &ids).unwrap()).unwrap();
                let dispatched = read_rows(gathered_head(h.clone(), w, &ids).unwrap()).unwrap();
                assert_eq!(dispatched, fused, "{layout}: the dispatcher runs the kernel on wgpu");
                for i in 0..m {
                    for j in 0..ids.len() {
                        let (want, bound) = exact(&hidden, &head, d, vocab, i, ids[j]);
                        for (what, got) in [("kernel", fused[i][j]), ("reference", reference[i][j])] {
                            assert!(
                                (f64::from(got) - want).abs() <= bound,
                                "{layout} m={m} d={d} n={n}, {what} ({i}, {j}): {got} vs {want} (bound {bound})"
                            );
                        }
                    }
                }
            }
        }
    }
}
