// A strict reader of Prometheus text (format 0.0.4) for the tests: what RenderPrometheus
// writes and what node_exporter serves are read the same way, then compared as numbers.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace uplink::agent::node::text_format {

struct Family {
  std::string help;
  std::string type;
  // Series by their labels, canonical: sorted by name, empty values left out (Prometheus
  // treats an empty label as an absent one), "name=value" joined by ','.
  std::map<std::string, double> series;
};

struct Exposition {
  std::map<std::string, Family> families;
  std::string error;  // empty when the text was valid; else the first problem, with its line
};

// Every sample line must belong to a family announced by # TYPE, name a valid metric, have
// well-formed labels and a number Go's ParseFloat reads; a series may not repeat.
Exposition ParseExposition(std::string_view text);

}  // namespace uplink::agent::node::text_format
