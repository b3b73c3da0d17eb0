//! Which network addresses are private: a leaf both the configuration
//! (is the object store's URL reachable from outside?) and the URL policy
//! of [`crate::fetch`] use.

use std::net::IpAddr;

/// Whether an address is one a public URL must not reach. An IPv6 address
/// that embeds an IPv4 one (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`,
/// translated `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`,
/// Teredo `2001::/32`) is judged by that IPv4 address; the local-use NAT64
/// prefix `64:ff9b:1::/48` is private.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || v4.octets()[0] == 0
                || (v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64) // 100.64/10 carrier-grade NAT
        }
        IpAddr::V6(v6) => {
            if v6.is_loopback() || v6.is_unspecified() {
                return true;
            }
            if let Some(v4) = embedded_v4(v6) {
                return is_private(IpAddr::V4(v4));
            }
            let s = v6.segments();
            v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link local
                || (s[0] & 0xffc0) == 0xfec0 // site local (deprecated)
                || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1) // 64:ff9b:1::/48 local-use NAT64
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        }
    }
}

/// The IPv4 address an IPv6 address carries, by the forms that route to it.
fn embedded_v4(v6: std::net::Ipv6Addr) -> Option<std::net::Ipv4Addr> {
    let s = v6.segments();
    let o = v6.octets();
    let last = std::net::Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match s {
        // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible)
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0, 0, _, _] => Some(last),
        // ::ffff:0:a.b.c.d (translated)
        [0, 0, 0, 0, 0xffff, 0, _, _] => Some(last),
        // 64:ff9b::/96 (NAT64, well-known prefix)
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(last),
        // 2002:AABB:CCDD::/48 (6to4)
        [0x2002, ..] => Some(std::net::Ipv4Addr::new(o[2], o[3], o[4], o[5])),
        // 2001:0::/32 (Teredo): the client's address, inverted
        [0x2001, 0, ..] => Some(std::net::Ipv4Addr::from(!u32::from(last))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "172.16.5.5",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            // IPv6 forms that embed a private IPv4 address
            "::127.0.0.1",
            "::10.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:0:127.0.0.1",
            "64:ff9b::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::10.1.2.3",
            "64:ff9b:1::8.8.8.8",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "2002:c0a8:0101::",
            "2001:0:4136:e378:8000:63bf:80ff:fffe", // Teredo, client 127.0.0.1
            "fec0::1",
        ] {
            assert!(is_private(a.parse().unwrap()), "{a}");
        }
        for a in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::8.8.8.8",
            "2002:0808:0808::",
        ] {
            assert!(!is_private(a.parse().unwrap()), "{a}");
        }
    }
}
