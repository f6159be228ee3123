// OpenAPI v3 documents, as kube-apiserver publishes them under /openapi/v3, for
// `kubectl explain` and for the check kubectl makes before it sends a fieldValidation query
// parameter (kubectl create and apply validate on the server when the PATCH operation of a
// kind lists that parameter).
//
// The schemas come from a data file (data/openapi-schemas.yaml): a map from schema name
// ("io.k8s.api.core.v1.Pod") to an OpenAPI schema, a subset of the real ones. Each
// group-version document ("api/v1", "apis/apps/v1") holds the schemas whose
// x-kubernetes-group-version-kind names that group-version, everything they reference, and
// a PATCH path per served kind.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "common/status.h"

namespace uplink::kubesim {

class OpenApiDocuments {
 public:
  // InvalidArgument when the YAML is not a map of schemas, or a $ref names a schema the file
  // does not define.
  static Result<OpenApiDocuments> Load(std::string_view schemas_yaml,
                                       std::string_view server_version);

  // GET /openapi/v3: {"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=H"}}}.
  const std::string& IndexJson() const { return index_json_; }

  struct Document {
    std::string json;
    std::string hash;  // upper-case hex SHA-256 of json, as in serverRelativeURL
  };
  // The document for "api/v1" or "apis/apps/v1"; null when there is none.
  const Document* Find(std::string_view path) const;

 private:
  std::string index_json_;
  std::map<std::string, Document, std::less<>> documents_;
};

}  // namespace uplink::kubesim
