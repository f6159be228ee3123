// The chart test tools build in GOPATH mode against Debian's packaged Go sources
// (/usr/share/gocode/src): tests/chart/CMakeLists.txt sets GO111MODULE=off and a private
// GOPATH. This file is not used for module resolution; its presence lets Go's minimal
// module compatibility map "github.com/Masterminds/sprig/v3" (and semver/v3) onto
// Debian's directories, which hold those modules without the /v3 path element.
module uplink/chart

go 1.19
