// Decoding the Kubernetes protobuf envelope for the objects kubectl creates.
//
// kubectl 1.32 sends the bodies of its typed create commands (`kubectl create configmap|
// namespace|secret|serviceaccount|role|clusterrole|rolebinding|clusterrolebinding`, and the
// SelfSubjectAccessReview / SelfSubjectRulesReview of `kubectl auth can-i`) as
// application/vnd.kubernetes.protobuf ("k8s\0" + runtime.Unknown{typeMeta, raw}) and does not
// fall back to JSON on 415, so the simulator decodes those types: metadata name,
// generateName, namespace, labels, annotations; ConfigMap data, binaryData; Namespace
// spec.finalizers; Secret data, type, stringData, immutable; ServiceAccount
// automountServiceAccountToken; RBAC rules, subjects and roleRef; the reviews' specs. Other
// fields are skipped; a known field with the wrong wire type is refused, as gogo-protobuf
// refuses it. Errors never quote field values, so Secret data cannot reach a message.
#pragma once

#include <string_view>

#include "common/json_fwd.h"
#include "common/status.h"

namespace uplink::kubesim {

inline constexpr std::string_view kProtobufMediaType = "application/vnd.kubernetes.protobuf";

// The object as JSON (with kind and apiVersion from the envelope); InvalidArgument for
// malformed input or unsupported kinds.
Result<json::object> DecodeProtobufObject(std::string_view body);

}  // namespace uplink::kubesim
