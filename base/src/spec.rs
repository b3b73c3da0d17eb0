//! The row type and the whole-table facts that generated code refers to:
//! the `gateway-spec` crate, declared once for the generator and the
//! runtime (see its documentation). Every path `runtime::spec::...` names
//! an item of that crate.

pub use gateway_spec::*;
