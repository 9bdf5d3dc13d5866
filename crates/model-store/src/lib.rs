//! Placeholder: being written (see the crate description).
