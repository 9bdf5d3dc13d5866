//! Moving small results from the device to the host, with errors instead of panics.

use burn::tensor::{Int, Tensor};

use crate::error::{Error, Result};

/// Reads a float tensor back as `f32` values in row-major order.
pub fn read_f32<const D: usize>(tensor: Tensor<D>) -> Result<Vec<f32>> {
    let data = tensor.try_into_data().map_err(|e| Error::Readback { message: format!("{e:?}") })?;
    data.try_into_vec_as::<f32>().map_err(|e| Error::Readback { message: format!("{e:?}") })
}

/// Reads an integer tensor back as `i64` values in row-major order.
pub fn read_i64<const D: usize>(tensor: Tensor<D, Int>) -> Result<Vec<i64>> {
    let data = tensor.try_into_data().map_err(|e| Error::Readback { message: format!("{e:?}") })?;
    data.try_into_vec_as::<i64>().map_err(|e| Error::Readback { message: format!("{e:?}") })
}

/// Reads a `[rows, cols]` float tensor back as one vector per row.
pub fn read_rows(tensor: Tensor<2>) -> Result<Vec<Vec<f32>>> {
    let [_, cols] = tensor.dims();
    let values = read_f32(tensor)?;
    Ok(values.chunks(cols.max(1)).map(<[f32]>::to_vec).collect())
}
