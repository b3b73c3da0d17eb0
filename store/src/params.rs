//! Statement parameters as both databases take them ([`P`], `p![..]`),
//! and `?N` → `$N` for PostgreSQL ([`to_postgres`]). A leaf of `store`:
//! both `sql` (the [`super::sql::Db`] interface) and `pg` (the connection)
//! use it, and it uses neither.

use std::borrow::Cow;

use rusqlite::types::{ToSqlOutput, ValueRef};
use tokio_postgres::types::{IsNull, Type};

/// A statement parameter.
#[derive(Debug, Clone, Copy)]
pub enum P<'a> {
    Null,
    Int(i64),
    Text(&'a str),
    Blob(&'a [u8]),
}

/// A statement parameter that owns its value: one kept for a statement
/// sent later ([`super::pg::PgConn::defer`]).
#[derive(Debug, Clone)]
pub enum OwnedP {
    Null,
    Int(i64),
    Text(String),
    Blob(Vec<u8>),
}

impl From<&P<'_>> for OwnedP {
    fn from(p: &P<'_>) -> OwnedP {
        match *p {
            P::Null => OwnedP::Null,
            P::Int(i) => OwnedP::Int(i),
            P::Text(s) => OwnedP::Text(s.to_owned()),
            P::Blob(b) => OwnedP::Blob(b.to_vec()),
        }
    }
}

impl OwnedP {
    fn as_p(&self) -> P<'_> {
        match self {
            OwnedP::Null => P::Null,
            OwnedP::Int(i) => P::Int(*i),
            OwnedP::Text(s) => P::Text(s),
            OwnedP::Blob(b) => P::Blob(b),
        }
    }
}

/// What can be bound as a parameter ([`p!`](crate::p)).
pub trait ToP {
    fn to_p(&self) -> P<'_>;
}

macro_rules! int_param {
    ($($t:ty),*) => {$(
        impl ToP for $t {
            fn to_p(&self) -> P<'_> {
                P::Int(*self as i64)
            }
        }
    )*};
}
int_param!(i64, i32, u32, u16, u64, usize);

impl ToP for bool {
    fn to_p(&self) -> P<'_> {
        P::Int(*self as i64)
    }
}
impl ToP for str {
    fn to_p(&self) -> P<'_> {
        P::Text(self)
    }
}
impl ToP for String {
    fn to_p(&self) -> P<'_> {
        P::Text(self)
    }
}
impl ToP for [u8] {
    fn to_p(&self) -> P<'_> {
        P::Blob(self)
    }
}
impl ToP for Vec<u8> {
    fn to_p(&self) -> P<'_> {
        P::Blob(self)
    }
}
impl<T: ToP + ?Sized> ToP for &T {
    fn to_p(&self) -> P<'_> {
        (**self).to_p()
    }
}
impl<T: ToP> ToP for Option<T> {
    fn to_p(&self) -> P<'_> {
        match self {
            Some(v) => v.to_p(),
            None => P::Null,
        }
    }
}

/// Statement parameters: `p![a, b, c]` binds `?1`, `?2`, `?3`.
macro_rules! p {
    ($($e:expr),* $(,)?) => {
        &[$($crate::params::ToP::to_p(&$e)),*][..]
    };
}
pub(crate) use p;

impl rusqlite::ToSql for P<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match *self {
            P::Null => ValueRef::Null,
            P::Int(i) => ValueRef::Integer(i),
            P::Text(s) => ValueRef::Text(s.as_bytes()),
            P::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

impl tokio_postgres::types::ToSql for P<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match *self {
            P::Null => Ok(IsNull::Yes),
            P::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(i)?.to_sql(ty, out),
                Type::BOOL => (i != 0).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR => i.to_string().as_str().to_sql(ty, out),
                _ => Err(format!("integer parameter for a {ty} column").into()),
            },
            P::Text(s) => s.to_sql(ty, out),
            P::Blob(b) => b.to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

impl tokio_postgres::types::ToSql for OwnedP {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        self.as_p().to_sql(ty, out)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

/// `?N` parameters as PostgreSQL's `$N` (outside quoted text).
pub(super) fn to_postgres(sql: &str) -> Cow<'_, str> {
    if !sql.contains('?') {
        return Cow::Borrowed(sql);
    }
    let mut out = String::with_capacity(sql.len());
    let mut quoted = false;
    for c in sql.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                out.push(c);
            }
            '?' if !quoted => out.push('$'),
            _ => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_become_dollar_numbers_outside_quotes() {
        assert_eq!(
            to_postgres("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND d IN (?2, ?10)"),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND d IN ($2, $10)"
        );
        assert!(matches!(to_postgres("SELECT 1"), Cow::Borrowed(_)));
    }
}
