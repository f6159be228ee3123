package helmlite

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// Bounds on a packaged chart: its compressed size, what it inflates to, its file count.
const (
	maxArchiveBytes    = 4 << 20
	maxArchiveInflated = 16 << 20
	maxArchiveFiles    = 512
)

// LoadArchive reads a packaged chart (a .tgz as `helm package` writes it and Helm's loader
// reads it): a gzip'd tar whose entries all sit under one directory named after the chart.
// Only regular files and directories are allowed; an absolute path, a ".." or a link is
// refused, as are archives past the bounds above.
func LoadArchive(name string, data []byte) (*Chart, error) {
	if len(data) > maxArchiveBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxArchiveBytes)
	}
	zipped, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: not gzip: %v", name, err)
	}
	reader := tar.NewReader(io.LimitReader(zipped, maxArchiveInflated+1))
	files := map[string][]byte{}
	top := ""
	total := 0
	for {
		header, err := reader.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not a tar archive (or cut short): %v", name, err)
		}
		entry := header.Name
		if strings.HasPrefix(entry, "/") || strings.Contains(entry, "\\") {
			return nil, fmt.Errorf("%s: entry %q has an absolute or Windows path", name, entry)
		}
		for _, part := range strings.Split(entry, "/") {
			if part == ".." {
				return nil, fmt.Errorf("%s: entry %q leaves the chart's directory", name, entry)
			}
		}
		clean := path.Clean(entry)
		first, rest, _ := strings.Cut(clean, "/")
		if top == "" {
			top = first
		} else if first != top {
			return nil, fmt.Errorf("%s: entries under both %s/ and %s/: a chart has one top directory", name, top, first)
		}
		switch header.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return nil, fmt.Errorf("%s: entry %q is not a regular file or directory", name, entry)
		}
		if rest == "" {
			return nil, fmt.Errorf("%s: file %q is outside the chart's directory", name, entry)
		}
		if _, dup := files[rest]; dup {
			return nil, fmt.Errorf("%s: %q appears twice", name, entry)
		}
		if len(files) == maxArchiveFiles {
			return nil, fmt.Errorf("%s: more than %d files", name, maxArchiveFiles)
		}
		content, err := io.ReadAll(io.LimitReader(reader, maxChartFileBytes+1))
		if err != nil {
			return nil, fmt.Errorf("%s: reading %q: %v", name, entry, err)
		}
		if len(content) > maxChartFileBytes {
			return nil, fmt.Errorf("%s: %q is larger than %d bytes", name, entry, maxChartFileBytes)
		}
		if total += len(content); total > maxArchiveInflated {
			return nil, fmt.Errorf("%s: inflates to more than %d bytes", name, maxArchiveInflated)
		}
		files[rest] = content
	}
	chart, err := loadFiles(name, files)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if top != chart.Metadata.Name {
		return nil, fmt.Errorf("%s: the top directory is %s/, not the chart's name %s/", name, top, chart.Metadata.Name)
	}
	return chart, nil
}
