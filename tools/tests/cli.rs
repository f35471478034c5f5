//! The `chronicle` binary, black-box: one integration-test binary for the CLI.
