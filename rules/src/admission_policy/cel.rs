//! CEL text: literals written so any setting reads back as itself, and the policy's expressions. The
//! settings (NAD name and namespace, Linkerd's namespace, the uid-range annotation, the uid offset)
//! are rendered into the text as literals, not read from a params object: a binding re-created with
//! ConfigMap params keeps evaluating stale ones (kubernetes#130887).
//!
//! No variable holds an `optional`: on kube-apiserver v1.35.6 one used as an optional map entry
//! (`{?key: variables.x}`) panicked the policy's validation (cel-go's homogeneous-literal check) and
//! `string(variables.x.value())` failed at run time. "None" is `''` for strings, `-1` for uids.

use std::fmt::Write;

use crate::decision::DecisionConfig;
use crate::proxy_uid::{ProxyUidSource, PROXY_UID_PRECEDENCE};
use vocab::Uid;

/// `s` as a CEL string literal: double-quoted, with `\` and `"` escaped and every control character
/// written as an escape, so no setting can end the literal or change the expression around it.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str(r"\\"),
            '"' => out.push_str(r#"\""#),
            '\n' => out.push_str(r"\n"),
            '\r' => out.push_str(r"\r"),
            '\t' => out.push_str(r"\t"),
            // Control characters are all below U+00A0: four hex digits hold them.
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A variable of the policy: `variables.<name>` in later expressions.
pub(super) struct Variable {
    pub name: &'static str,
    pub expression: String,
}

/// `variables.<name>`.
fn v(name: &str) -> String {
    format!("variables.{name}")
}

/// The largest uid (`u32::MAX` is `(uid_t)-1`, no uid): CEL's ints are int64, so the range checks that
/// Rust gets from `u32` are written out.
const NO_UID: i64 = Uid::MAX as i64;

/// A `[namespace/]name[@interface]` item of the comma list, as `networks::parse_item` accepts it.
const COMMA_ITEM: &str = r"^([A-Za-z0-9._-]+/)?[A-Za-z0-9._-]+(@[A-Za-z0-9._-]+)?$";
/// Everything up to the last character that is not white space (Rust's `trim_end`: Unicode's
/// White_Space, which is these ASCII ones, NEL and the separators `\p{Z}`).
const UP_TO_TRAILING_SPACE: &str = r"(?s)^.*[^\t\n\v\f\r\x{85}\p{Z}]";
/// A decimal number of at most 10 significant digits (so CEL's `int()` cannot overflow): the uid
/// range's parts, which must then fit a u32.
const RANGE: &str = r"^0*[0-9]{1,10}/0*[0-9]{1,10}$";
/// `vocab::parse_proxy_uid`'s grammar (Go's ParseInt base 10), bounded as [`RANGE`] is.
const PROXY_UID: &str = r"^[+-]?0*[0-9]{1,10}$";

/// `uid` lies inside the namespace's range (`UidRange::contains`), and is a uid at all.
fn in_range(uid: &str) -> String {
    format!(
        "({uid} >= {first} && {uid} - {first} < {size} && {uid} < {NO_UID})",
        first = v("rangeFirst"),
        size = v("rangeSize")
    )
}

/// The uid the text `text` names as `vocab::parse_proxy_uid` reads it, -1 when it names none.
fn parsed_uid(text: &str) -> String {
    format!(
        "{text}.matches({re}) && int({text}) >= 0 && int({text}) <= {max} ? int({text}) : -1",
        re = quote(PROXY_UID),
        max = vocab::MAX_KUBERNETES_UID
    )
}

/// The int `run_as` (a `runAsUser`, -1 when unset) if it is a uid (`vocab::uid_from_kubernetes`),
/// else -1.
fn run_as_uid(run_as: &str) -> String {
    format!("({run_as} >= 0 && {run_as} < {NO_UID} ? {run_as} : -1)")
}

/// The variables, in order (each may use those before it), for `cfg`.
pub(super) fn variables(cfg: &DecisionConfig) -> Vec<Variable> {
    let q = |s: &str| quote(s);
    let (m, i, n, u) = (
        q(vocab::MULTUS_ANNOTATION),
        q(vocab::INJECT_ANNOTATION),
        q(vocab::NETWORKS_ANNOTATION),
        q(vocab::PROXY_UID_ANNOTATION),
    );
    let effective = |key: &str| {
        format!(
            "{pod}[?{key}].or({ns}[?{key}]).orValue('')",
            key = q(key),
            pod = v("podAnnotations"),
            ns = v("nsAnnotations")
        )
    };
    // Where our NAD lives, as the networks annotation names it (`networks::attach`).
    let nad_namespace = match cfg.nad.shared() {
        Some(shared) => q(shared),
        None => "request.namespace".to_string(),
    };
    let item = q(&cfg.nad.reference());
    let mut vars = vec![
        (
            "podAnnotations",
            "object.metadata.?annotations.orValue({})".to_string(),
        ),
        (
            "nsAnnotations",
            "namespaceObject.metadata.?annotations.orValue({})".to_string(),
        ),
        // 2. Who is attached.
        (
            "controlPlane",
            format!(
            "request.namespace == {linkerd} && object.metadata.?labels[?{cp}].orValue('') != ''",
            linkerd = q(&cfg.nad.linkerd_namespace),
            cp = q(vocab::CONTROL_PLANE_COMPONENT_LABEL)),
        ),
        (
            "selected",
            format!(
                "{cp} || ({multus} == {enabled} && {inject} != {disabled})",
                cp = v("controlPlane"),
                multus = effective(vocab::MULTUS_ANNOTATION),
                inject = effective(vocab::INJECT_ANNOTATION),
                enabled = q(vocab::MULTUS_ENABLED),
                disabled = q(vocab::INJECT_DISABLED)
            ),
        ),
    ];
    if cfg.nad.attach.uses_nads() {
        // 3. The comma list (a JSON list never reaches the policy: `webhook_only`).
        vars.extend([
            (
                "networksText",
                format!("{}[?{n}].orValue('').trim()", v("podAnnotations")),
            ),
            (
                "networksItems",
                format!(
                    "{t} == '' ? [] : {t}.split(',').map(item, item.trim())",
                    t = v("networksText")
                ),
            ),
            (
                "networksReadable",
                format!(
                    "{}.all(item, item.matches({}))",
                    v("networksItems"),
                    q(COMMA_ITEM)
                ),
            ),
            (
                "networksPresent",
                format!(
                    "{}.exists(item, (item.contains('/') ? item : request.namespace + '/' + item)\
                 .split('@')[0] == {nad_namespace} + '/' + {nad})",
                    v("networksItems"),
                    nad = q(&cfg.nad.name)
                ),
            ),
            (
                "attached",
                format!("{} && {}", v("selected"), v("networksReadable")),
            ),
            // Appended after the value without its trailing space, in the author's separator style.
            (
                "networksKept",
                format!(
                    "{t} == '' ? '' : {pod}[{n}].find({re})",
                    t = v("networksText"),
                    pod = v("podAnnotations"),
                    re = q(UP_TO_TRAILING_SPACE)
                ),
            ),
            (
                "networks",
                format!(
                    "{attached} && !{present} ? ({items}.size() == 0 ? {item} : \
                 {kept} + ({kept}.contains(', ') ? ', ' : ',') + {item}) : ''",
                    attached = v("attached"),
                    present = v("networksPresent"),
                    items = v("networksItems"),
                    kept = v("networksKept")
                ),
            ),
        ]);
    } else {
        // 3'. Multus' auxiliary chain attaches every selected pod; the annotation is never read.
        vars.extend([("attached", v("selected")), ("networks", "''".to_string())]);
    }
    let offset = i64::from(cfg.uids.proxy_uid_offset);
    let range_text = format!("{}[?{}]", v("nsAnnotations"), q(&cfg.uids.range_annotation));
    vars.extend([
        // 4. OpenShift's uid range, read as `UidRange::parse` reads it.
        (
            "uidApplies",
            format!(
                "{} && !{} && {range_text}.hasValue()",
                v("attached"),
                v("controlPlane")
            ),
        ),
        (
            "rangeParts",
            format!("{range_text}.orValue('').trim().split('/')"),
        ),
        (
            "rangeOk",
            format!(
                "{applies} && {range_text}.orValue('').trim().matches({re}) && \
             int({parts}[0]) <= {NO_UID} && int({parts}[1]) <= {NO_UID}",
                applies = v("uidApplies"),
                re = q(RANGE),
                parts = v("rangeParts")
            ),
        ),
        (
            "rangeFirst",
            format!("{} ? int({}[0]) : 0", v("rangeOk"), v("rangeParts")),
        ),
        (
            "rangeSize",
            format!("{} ? int({}[1]) : 0", v("rangeOk"), v("rangeParts")),
        ),
        // The proxy uid someone chose (pod, else namespace), if `parse_proxy_uid` takes it. Uids
        // are ints, -1 for none (optional ints do not survive the apiserver's variables).
        (
            "chosen",
            format!(
                "{pod}[?{u}].or({ns}[?{u}]).hasValue()",
                pod = v("podAnnotations"),
                ns = v("nsAnnotations")
            ),
        ),
        (
            "chosenText",
            format!(
                "{pod}[?{u}].or({ns}[?{u}]).orValue('')",
                pod = v("podAnnotations"),
                ns = v("nsAnnotations")
            ),
        ),
        ("chosenUid", parsed_uid(&v("chosenText"))),
        // `UidRange::proxy_uid`: first + offset, inside the range and a uid.
        (
            "offsetUid",
            format!(
                "{offset} > 0 && {offset} < {size} && {first} + {offset} < {NO_UID} \
             ? {first} + {offset} : -1",
                size = v("rangeSize"),
                first = v("rangeFirst")
            ),
        ),
        // The uid the proxy is made to run as: the chosen one if inside the range, else ours.
        (
            "proxyUid",
            format!(
                "!{ok} ? -1 : {c} ? ({cu} >= 0 && {inside} ? {cu} : -1) : {o}",
                ok = v("rangeOk"),
                c = v("chosen"),
                cu = v("chosenUid"),
                inside = in_range(&v("chosenUid")),
                o = v("offsetUid")
            ),
        ),
        (
            "proxyUidAnnotation",
            format!(
                "{ok} && !{c} && {o} >= 0 ? string({o}) : ''",
                ok = v("rangeOk"),
                c = v("chosen"),
                o = v("offsetUid")
            ),
        ),
        // 1. Copied from the namespace where the pod has no value of its own; 3. and 4. as above.
        (
            "annotations",
            format!(
                "{{?{m}: {m} in {pod} ? optional.none() : {ns}[?{m}], \
               ?{i}: {i} in {pod} ? optional.none() : {ns}[?{i}], \
               ?{n}: {net} == '' ? optional.none() : optional.of({net}), \
               ?{u}: {uid} == '' ? optional.none() : optional.of({uid})}}",
                pod = v("podAnnotations"),
                ns = v("nsAnnotations"),
                net = v("networks"),
                uid = v("proxyUidAnnotation")
            ),
        ),
    ]);
    vars.extend(container_variables());
    vars.into_iter()
        .map(|(name, expression)| Variable { name, expression })
        .collect()
}

/// The warning policy's own variables, after [`variables`]: the app containers running as the uid
/// linkerd-cni exempts, as `proxy_uid::collision::collisions` finds them on the pod as the mutations
/// left it (the proxy uid annotation the policy or webhook set, the proxy's `runAsUser` moved into
/// the range), which is what `decide` judges with the values it sets.
pub(super) fn collision_variables() -> Vec<Variable> {
    let q = |s: &str| quote(s);
    let u = q(vocab::PROXY_UID_ANNOTATION);
    let own = "c.?securityContext.?runAsUser.orValue(-1)";
    let own_uid = run_as_uid(own);
    let vars = vec![
        // The pod's `runAsUser`: what a container without its own runs as.
        (
            "podRunAsUser",
            run_as_uid("object.spec.?securityContext.?runAsUser.orValue(-1)"),
        ),
        // `PodView::proxy_uid`: the proxy's own uid, else the pod's.
        (
            "proxyRunsAs",
            format!(
                "{own} >= 0 ? {own} : {pod}",
                own = run_as_uid(&v("proxyRunAsUser")),
                pod = v("podRunAsUser")
            ),
        ),
        (
            "podAnnotationUid",
            parsed_uid(&format!("{}[?{u}].orValue('')", v("podAnnotations"))),
        ),
        (
            "nsAnnotationUid",
            parsed_uid(&format!("{}[?{u}].orValue('')", v("nsAnnotations"))),
        ),
        // `Sources::exempted_valid`: the first of them by the plugin's precedence that names a uid,
        // and which one (the message's fix depends on it).
        (
            "exemptedFrom",
            first_source(|var| format!("'{var}'"), "''"),
        ),
        ("exemptedUid", first_source(v, "-1")),
        // `collisions`: the containers but the proxy (init containers may run as the proxy uid),
        // each as its own uid, else the pod's, else the range's first; in a pod that has a proxy and
        // that `decide` aligns (attached, not Linkerd's control plane).
        (
            "collisions",
            format!(
                "{attached} && !{cp} && ({pc} >= 0 || {pi} >= 0) && {ex} >= 0 ? \
                 object.spec.containers.filter(c, c.name != {proxy} && \
                 ({own_uid} >= 0 ? {own_uid} : {pod} >= 0 ? {pod} : {ok} ? {first} : -1) == {ex}) : []",
                attached = v("attached"),
                cp = v("controlPlane"),
                pc = v("proxyInContainers"),
                pi = v("proxyInInits"),
                ex = v("exemptedUid"),
                proxy = q(vocab::PROXY_CONTAINER),
                pod = v("podRunAsUser"),
                ok = v("rangeOk"),
                first = v("rangeFirst"),
            ),
        ),
    ];
    vars.into_iter()
        .map(|(name, expression)| Variable { name, expression })
        .collect()
}

/// The sources of the exempted uid the webhook knows, by `PROXY_UID_PRECEDENCE`, each with the
/// variable holding the uid it names (-1: none). The plugin's configured uid is the plugin's alone.
pub(super) fn exempting_sources() -> Vec<(ProxyUidSource, &'static str)> {
    PROXY_UID_PRECEDENCE
        .into_iter()
        .filter_map(|source| {
            let var = match source {
                ProxyUidSource::PodAnnotation => "podAnnotationUid",
                ProxyUidSource::ProxyRunAsUser => "proxyRunsAs",
                ProxyUidSource::NamespaceAnnotation => "nsAnnotationUid",
                ProxyUidSource::Configured => return None,
            };
            Some((source, var))
        })
        .collect()
}

/// `a >= 0 ? then(a) : b >= 0 ? then(b) : … : otherwise` over [`exempting_sources`]' variables.
fn first_source(then: impl Fn(&str) -> String, otherwise: &str) -> String {
    exempting_sources()
        .into_iter()
        .rev()
        .fold(otherwise.to_string(), |rest, (_, var)| {
            format!("{} >= 0 ? {} : {rest}", v(var), then(var))
        })
}

/// For a container `c` of `variables.collisions`: where its uid comes from, as `collision::AppUid`
/// says (its own, the pod's, the range's first).
pub(super) fn collision_from(own: &str, pod: &str, range: &str) -> String {
    let own_uid = run_as_uid("c.?securityContext.?runAsUser.orValue(-1)");
    format!(
        "({own_uid} >= 0 ? {own} : {p} >= 0 ? {pod} : {range})",
        p = v("podRunAsUser"),
        own = quote(own),
        pod = quote(pod),
        range = quote(range)
    )
}

/// Linkerd's proxy and validator, found as `containers::PodContainers` finds them.
fn container_variables() -> Vec<(&'static str, String)> {
    let q = |s: &str| quote(s);
    let inits = "object.spec.?initContainers.orValue([])";
    let proxy = q(vocab::PROXY_CONTAINER);
    // A native sidecar: an init container that keeps running.
    let sidecar = q(&format!("{}/Always", vocab::PROXY_CONTAINER));
    let target = v("validatorTarget");
    vec![
        ("proxyInContainers", format!("object.spec.containers.map(c, c.name).indexOf({proxy})")),
        ("proxyInInits", format!(
            "{} >= 0 ? -1 : {inits}.map(c, c.name + '/' + c.?restartPolicy.orValue('')).indexOf({sidecar})",
            v("proxyInContainers"))),
        ("proxyRunAsUser", format!(
            "{c} >= 0 ? object.spec.containers[{c}].?securityContext.?runAsUser.orValue(-1) : \
             {i} >= 0 ? object.spec.initContainers[{i}].?securityContext.?runAsUser.orValue(-1) : -1",
            c = v("proxyInContainers"), i = v("proxyInInits"))),
        ("proxyHasSecurityContext", format!(
            "{c} >= 0 ? has(object.spec.containers[{c}].securityContext) : \
             {i} >= 0 && has(object.spec.initContainers[{i}].securityContext)",
            c = v("proxyInContainers"), i = v("proxyInInits"))),
        ("proxyPath", format!(
            "{c} >= 0 ? '/spec/containers/' + string({c}) : '/spec/initContainers/' + string({i})",
            c = v("proxyInContainers"), i = v("proxyInInits"))),
        ("moveProxy", format!(
            "{p} >= 0 && ({c} >= 0 || {i} >= 0) && {run} != {p}",
            p = v("proxyUid"), c = v("proxyInContainers"), i = v("proxyInInits"),
            run = v("proxyRunAsUser"))),
        ("validator", format!("{inits}.map(c, c.name).indexOf({})", q(vocab::VALIDATOR_CONTAINER))),
        ("validatorHasUser", validator_has("runAsUser")),
        ("validatorUser", validator_uid("runAsUser")),
        ("validatorHasGroup", validator_has("runAsGroup")),
        ("validatorGroup", validator_uid("runAsGroup")),
        // `containers::align`: a uid of the range other than the proxy's.
        ("validatorUserOk", format!(
            "{has} && {inside} && {u} != {p}",
            has = v("validatorHasUser"), u = v("validatorUser"), p = v("proxyUid"),
            inside = in_range(&v("validatorUser")))),
        ("validatorCandidates", format!(
            "[{f}, {f} + 1].filter(x, {inside} && x != {p})",
            f = v("rangeFirst"), p = v("proxyUid"), inside = in_range("x"))),
        ("validatorTarget", format!(
            "{ok} ? {u} : {c}.size() > 0 ? {c}[0] : -1",
            ok = v("validatorUserOk"), u = v("validatorUser"), c = v("validatorCandidates"))),
        ("moveValidatorUser", format!(
            "{ok} && {has} && !{uok} && {target} >= 0",
            ok = v("rangeOk"), has = v("validatorHasUser"), uok = v("validatorUserOk"))),
        ("moveValidatorGroup", format!(
            "{ok} && {has} && !{inside} && {target} >= 0",
            ok = v("rangeOk"), has = v("validatorHasGroup"),
            inside = in_range(&v("validatorGroup")))),
    ]
}

/// The validator's securityContext field `field` (`runAsUser`, `runAsGroup`): is it set.
fn validator_has(field: &str) -> String {
    let i = v("validator");
    format!("{i} >= 0 && object.spec.initContainers[{i}].?securityContext.?{field}.hasValue()")
}

/// The validator's securityContext field `field` as an int, -1 when unset.
fn validator_uid(field: &str) -> String {
    let i = v("validator");
    format!("{i} < 0 ? -1 : object.spec.initContainers[{i}].?securityContext.?{field}.orValue(-1)")
}

/// The ApplyConfiguration: the annotations to set, merged into the pod's (nothing when none).
pub(super) fn apply_configuration() -> String {
    let a = v("annotations");
    format!(
        "{a}.size() == 0 ? Object{{}} : Object{{metadata: Object.metadata{{annotations: {a}}}}}"
    )
}

/// The JSONPatch: the proxy's and the validator's uids, as `containers::align` sets them (a whole
/// securityContext where there is none, else the field). Never behind a matchCondition of its own: a
/// policy whose condition failed in the first round is not reinvoked after the injector.
pub(super) fn json_patch() -> String {
    let add = |path: String, value: String| {
        format!("JSONPatch{{op: 'add', path: {path}, value: {value}}}")
    };
    let validator = |field: &str| {
        format!(
            "'/spec/initContainers/' + string({}) + {}",
            v("validator"),
            quote(&format!("/securityContext/{field}"))
        )
    };
    let uid = v("proxyUid");
    let target = v("validatorTarget");
    format!(
        "({move_proxy} ? [{has_sc} ? {field} : {whole}] : []) + \
         ({move_user} ? [{user}] : []) + ({move_group} ? [{group}] : [])",
        move_proxy = v("moveProxy"),
        has_sc = v("proxyHasSecurityContext"),
        field = add(
            format!("{} + '/securityContext/runAsUser'", v("proxyPath")),
            uid.clone()
        ),
        whole = add(
            format!("{} + '/securityContext'", v("proxyPath")),
            format!("{{'runAsUser': {uid}}}")
        ),
        move_user = v("moveValidatorUser"),
        user = add(validator("runAsUser"), target.clone()),
        move_group = v("moveValidatorGroup"),
        group = add(validator("runAsGroup"), target),
    )
}
