//! The AdmissionReview on the wire. Read in one pass, borrowing strings from the body: of the pod only
//! its metadata is kept, as unread text; the rest (spec, status, oldObject) is skipped. The other
//! fields kube's typed review required are still checked for shape, without being kept, so what
//! counted as "not an AdmissionReview" (a 400) still does. The answer is serialised directly.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use kube::core::admission::{AdmissionResponse, Operation};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Review<'a> {
    #[serde(borrow)]
    pub api_version: Cow<'a, str>,
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
    #[serde(borrow, default)]
    pub request: Option<Request<'a>>,
    /// Never sent to a webhook; typed only so a malformed one is refused as kube did.
    #[serde(default, rename = "response")]
    _response: Option<AdmissionResponse>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // the unused fields are read only to check their shape
pub(super) struct Request<'a> {
    #[serde(borrow)]
    pub uid: Cow<'a, str>,
    #[serde(borrow)]
    pub kind: Gvk<'a>,
    resource: Gvr,
    #[serde(borrow, default)]
    pub sub_resource: Option<Text<'a>>,
    #[serde(borrow, default)]
    request_kind: Option<Gvk<'a>>,
    #[serde(default)]
    request_resource: Option<Gvr>,
    #[serde(default)]
    request_sub_resource: Option<Str>,
    #[serde(default)]
    name: Str,
    #[serde(borrow, default)]
    pub namespace: Option<Text<'a>>,
    pub operation: Operation,
    user_info: FromMap<UserInfo>,
    #[serde(borrow, default)]
    pub object: Object<'a>,
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize)]
pub(super) struct Gvk<'a> {
    #[serde(borrow)]
    pub group: Cow<'a, str>,
    #[allow(dead_code)]
    version: Str,
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct Gvr {
    group: Str,
    version: Str,
    resource: Str,
    #[serde(default)]
    api_version: Str,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct UserInfo {
    username: Option<Str>,
    uid: Option<Str>,
    groups: Option<Vec<Str>>,
    extra: Option<StrMap<Vec<Str>>>,
}

/// A string, borrowed from the body unless it has escapes.
#[derive(Deserialize)]
pub(super) struct Text<'a>(#[serde(borrow)] pub Cow<'a, str>);

/// A JSON string, checked and dropped (a `Vec` of these never allocates).
#[derive(Default)]
struct Str;

impl<'de> Deserialize<'de> for Str {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Str;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Str, E> {
                Ok(Str)
            }
        }
        d.deserialize_str(V)
    }
}

/// A JSON object of strings to `T`, checked and dropped.
struct StrMap<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for StrMap<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = StrMap<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<Str, T>()?.is_some() {}
                Ok(StrMap(PhantomData))
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// `T` from a JSON object only: serde's derive also takes a positional list, which kube's types refused.
pub(super) struct FromMap<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for FromMap<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(V(PhantomData)).map(FromMap)
    }
}

/// The request's object, whatever JSON it is: only an object's `metadata` member is kept, unread.
#[derive(Default)]
pub(super) struct Object<'a> {
    pub metadata: Option<&'a RawValue>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Object<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let metadata = Member("metadata", PhantomData).deserialize(d)?;
        Ok(Object { metadata })
    }
}

/// From any JSON value, the member `.0` of an object read as `T` (the last one, as in a `Value`);
/// anything else has none.
pub(super) struct Member<T>(pub &'static str, pub PhantomData<T>);

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Member<T> {
    type Value = Option<T>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Member<T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let mut found = None;
        while let Some(is) = map.next_key_seed(KeyIs(self.0))? {
            if is {
                found = Some(map.next_value()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<T>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }
}

/// Whether a map key is `.0`, without keeping it.
struct KeyIs(&'static str);

impl<'de> DeserializeSeed<'de> for KeyIs {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIs {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
    }
}

/// The answer: an allowed review. Field order as kube's `AdmissionResponse` went through a `Value`
/// (the patch, inserted last, comes last).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReviewOut<'a> {
    api_version: &'a str,
    kind: &'static str,
    response: ResponseOut<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseOut<'a> {
    uid: &'a str,
    allowed: bool,
    /// kube always wrote its (empty) status.
    status: Empty,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
    /// The JSON patch in base64 (the API's encoding of []byte).
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<&'a str>,
}

#[derive(Serialize)]
struct Empty {}

/// The reply body of an allowed review.
pub(super) fn answer(
    api_version: &str,
    uid: &str,
    patch: Option<&str>,
    warnings: &[String],
) -> Vec<u8> {
    let review = ReviewOut {
        api_version,
        kind: "AdmissionReview",
        response: ResponseOut {
            uid,
            allowed: true,
            status: Empty {},
            patch_type: patch.map(|_| "JSONPatch"),
            warnings,
            patch,
        },
    };
    let size = 160
        + uid.len()
        + patch.map_or(0, str::len)
        + warnings.iter().map(|w| w.len() + 3).sum::<usize>();
    let mut body = Vec::with_capacity(size);
    match serde_json::to_writer(&mut body, &review) {
        Ok(()) => body,
        // Strings and a bool into a Vec cannot fail; this keeps the "never a 500" promise anyway.
        Err(_) => serde_json::json!({
            "apiVersion": api_version,
            "kind": "AdmissionReview",
            "response": { "uid": uid, "allowed": true }
        })
        .to_string()
        .into_bytes(),
    }
}

/// A JSON patch as the base64 of its JSON (encoded in one go: through a base64 writer, serde's many
/// small writes cost more than the JSON itself).
pub(super) fn base64_json(patch: &json_patch::Patch) -> Result<String, serde_json::Error> {
    let mut json = Vec::with_capacity(96 * patch.0.len());
    serde_json::to_writer(&mut json, patch)?;
    Ok(base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        json,
    ))
}
