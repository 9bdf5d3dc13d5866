//! Choosing the device at run time: `cpu` always, `wgpu` and `cuda` when their features are on.

use std::fmt;
use std::str::FromStr;

use burn::tensor::Device;

use crate::error::{Error, Result};

/// A device a user can name on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceChoice {
    /// burn's `flex` backend: pure Rust, SIMD, multi-threaded.
    Cpu,
    /// WebGPU through `wgpu` (Vulkan, Metal, DX12); needs the `wgpu` feature.
    Wgpu,
    /// NVIDIA CUDA; needs the `cuda` feature.
    Cuda,
}

impl DeviceChoice {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            DeviceChoice::Cpu => "cpu",
            DeviceChoice::Wgpu => "wgpu",
            DeviceChoice::Cuda => "cuda",
        }
    }

    /// Whether this build can create the device.
    pub fn is_compiled(self) -> bool {
        match self {
            DeviceChoice::Cpu => true,
            DeviceChoice::Wgpu => cfg!(feature = "wgpu"),
            DeviceChoice::Cuda => cfg!(feature = "cuda"),
        }
    }

    /// The burn device, or an error naming the cargo feature to enable.
    pub fn device(self) -> Result<Device> {
        match self {
            DeviceChoice::Cpu => Ok(Device::flex()),
            #[cfg(feature = "wgpu")]
            DeviceChoice::Wgpu => Ok(Device::wgpu(burn::tensor::DeviceKind::DefaultDevice)),
            #[cfg(not(feature = "wgpu"))]
            DeviceChoice::Wgpu => Err(Error::DeviceNotCompiled { name: "wgpu", feature: "wgpu" }),
            #[cfg(feature = "cuda")]
            DeviceChoice::Cuda => Ok(Device::cuda(0)),
            #[cfg(not(feature = "cuda"))]
            DeviceChoice::Cuda => Err(Error::DeviceNotCompiled { name: "cuda", feature: "cuda" }),
        }
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DeviceChoice {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self> {
        match name.to_ascii_lowercase().as_str() {
            "cpu" | "flex" => Ok(DeviceChoice::Cpu),
            "wgpu" | "gpu" => Ok(DeviceChoice::Wgpu),
            "cuda" => Ok(DeviceChoice::Cuda),
            _ => Err(Error::UnknownDevice { name: name.to_owned() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_errors() {
        for choice in [DeviceChoice::Cpu, DeviceChoice::Wgpu, DeviceChoice::Cuda] {
            assert_eq!(choice.name().parse::<DeviceChoice>().unwrap(), choice);
        }
        assert!("tpu".parse::<DeviceChoice>().unwrap_err().to_string().contains("\"tpu\""));
    }

    #[test]
    fn a_device_without_its_feature_names_the_feature() {
        if !DeviceChoice::Cuda.is_compiled() {
            let err = DeviceChoice::Cuda.device().unwrap_err().to_string();
            assert!(err.contains("--features cuda"), "{err}");
        }
        assert!(DeviceChoice::Cpu.device().is_ok());
    }
}
