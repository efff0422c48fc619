// `rw viz`: shows a VIZ trace (docs/viz-format.md) in a browser or in the terminal
// (docs/viz-viewer.md).
//   rw viz [--port N] DUMP.json         serve the viewer on http://127.0.0.1:N/
//   rw viz --html OUT.html DUMP.json    write a self-contained page with the dump in it
//   rw viz --text [--call N] DUMP.json  print calls, matches, rules and renders
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tinyrw {

int viz_main(const std::vector<std::string>& args);

namespace viz_assets {
// The viewer page (viewer/, bundled at build time into viewer_assets.cpp in the build directory),
// with the markers @@TINYRW_CONFIG@@ and @@TINYRW_DUMP@@ for `rw viz` to fill.
extern const char kViewerHtml[];
extern const std::size_t kViewerHtmlSize;
}  // namespace viz_assets

}  // namespace tinyrw
