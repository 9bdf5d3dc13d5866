//! The thread pool: counts, sharing, concurrent callers.

use anyspec_cpu_kernels::{Matrix, Threads};

#[test]
fn counts() {
    assert_eq!(Threads::new(1).unwrap().count(), 1);
    assert_eq!(Threads::new(3).unwrap().count(), 3);
    assert!(Threads::available().count() >= 1);
}

#[test]
fn one_pool_shared_by_concurrent_callers() {
    let (rows, cols) = (256, 256);
    let w: Vec<f32> = (0..rows * cols).map(|i| ((i * 31) % 17) as f32 - 8.0).collect();
    let matrix = Matrix::from_f32(rows, cols, &w).unwrap();
    let x: Vec<f32> = (0..2 * cols).map(|i| (i % 5) as f32).collect();
    let single = Threads::new(1).unwrap();
    let mut want = vec![0.0; 2 * rows];
    matrix.matmul(&x, &mut want, &single).unwrap();
    let pool = Threads::new(2).unwrap();
    std::thread::scope(|s| {
        for _ in 0..3 {
            let pool = pool.clone();
            let (matrix, x, want) = (&matrix, &x, &want);
            s.spawn(move || {
                for _ in 0..50 {
                    let mut y = vec![0.0; 2 * rows];
                    matrix.matmul(x, &mut y, &pool).unwrap();
                    assert_eq!(&y, want);
                }
            });
        }
    });
}

#[test]
fn matrices_and_pools_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Matrix>();
    send_sync::<Threads>();
    send_sync::<anyspec_cpu_kernels::Error>();
}
