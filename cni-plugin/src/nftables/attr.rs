//! Netlink attributes as nf_tables messages carry them: type-length-value, each padded to 4 bytes,
//! lengths and types in host order, nf_tables' own numbers in network order.

/// Set on the type of an attribute whose payload is more attributes.
pub const NLA_F_NESTED: u16 = 0x8000;
/// The type bits, without the nested and byte-order flags.
const TYPE_MASK: u16 = 0x3fff;

pub fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Builds a list of attributes.
#[derive(Debug, Default, Clone)]
pub struct AttrWriter {
    pub buf: Vec<u8>,
}

impl AttrWriter {
    pub fn bytes(&mut self, ty: u16, payload: &[u8]) -> &mut Self {
        // Our attributes are a few hundred bytes at most; netlink's limit is 64 KiB.
        let len = u16::try_from(4 + payload.len()).unwrap_or(u16::MAX);
        self.buf.extend_from_slice(&len.to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(payload);
        self.buf.resize(align4(self.buf.len()), 0);
        self
    }

    /// A NUL-terminated string, as the kernel expects names.
    pub fn str(&mut self, ty: u16, s: &str) -> &mut Self {
        let mut b = s.as_bytes().to_vec();
        b.push(0);
        self.bytes(ty, &b)
    }

    pub fn u32_be(&mut self, ty: u16, v: u32) -> &mut Self {
        self.bytes(ty, &v.to_be_bytes())
    }

    pub fn nested(&mut self, ty: u16, f: impl FnOnce(&mut AttrWriter)) -> &mut Self {
        let mut inner = AttrWriter::default();
        f(&mut inner);
        self.bytes(ty | NLA_F_NESTED, &inner.buf)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed netlink attribute at byte {0}")]
pub struct Malformed(pub usize);

/// The attributes of `buf`, by type (flags dropped), in order.
pub fn parse(buf: &[u8]) -> Result<Vec<(u16, &[u8])>, Malformed> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= buf.len() {
        let len = usize::from(u16::from_ne_bytes([buf[at], buf[at + 1]]));
        let ty = u16::from_ne_bytes([buf[at + 2], buf[at + 3]]) & TYPE_MASK;
        if len < 4 || at + len > buf.len() {
            return Err(Malformed(at));
        }
        out.push((ty, &buf[at + 4..at + len]));
        at += align4(len);
    }
    Ok(out)
}

/// The payload of the first attribute of type `ty`.
pub fn get<'a>(attrs: &[(u16, &'a [u8])], ty: u16) -> Option<&'a [u8]> {
    attrs.iter().find(|(t, _)| *t == ty).map(|(_, p)| *p)
}

pub fn be_u32(b: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(..4)?.try_into().ok()?))
}

/// A kernel string without its NUL terminator.
pub fn string(b: &[u8]) -> String {
    let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_attributes_round_trip_with_padding() {
        let mut w = AttrWriter::default();
        w.str(1, "lo").nested(2, |n| {
            n.u32_be(1, 7);
        });
        // "lo\0" takes 7 bytes, padded to 8; the nested one 4 + 8.
        assert_eq!(w.buf.len(), 8 + 12);
        let attrs = parse(&w.buf).unwrap();
        assert_eq!(string(get(&attrs, 1).unwrap()), "lo");
        let inner = parse(get(&attrs, 2).unwrap()).unwrap();
        assert_eq!(be_u32(get(&inner, 1).unwrap()), Some(7));
    }

    #[test]
    fn a_length_past_the_end_is_malformed() {
        assert_eq!(parse(&[9, 0, 1, 0, 0]), Err(Malformed(0)));
    }
}
