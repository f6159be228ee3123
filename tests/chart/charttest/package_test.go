package charttest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"uplink/chart/helmlite"
)

// The chart the console serves (packaged at build time by cmake/package_chart.sh).
func packagedChart(t *testing.T) (string, []byte) {
	t.Helper()
	file := os.Getenv("UPLINK_CHART_PACKAGE")
	if file == "" {
		t.Fatal("UPLINK_CHART_PACKAGE is not set (run through ctest)")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the packaged chart: %v (make build packages it)", err)
	}
	return file, data
}

// The package is `helm package`'s layout, reproducible, and holds exactly the chart
// directory's files.
func TestPackageIsTheChartDirectoryReproducibly(t *testing.T) {
	file, data := packagedChart(t)
	if filepath.Base(file) != "uplink-agent-"+loadChart(t).Metadata.Version+".tgz" {
		t.Errorf("the package is named %s", filepath.Base(file))
	}
	zipped, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if zipped.Name != "" || !zipped.ModTime.IsZero() {
		t.Errorf("the gzip header carries a name %q or a time %v", zipped.Name, zipped.ModTime)
	}
	fixed := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	reader := tar.NewReader(zipped)
	packaged := map[string]string{}
	var order []string
	for {
		header, err := reader.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		content, err := io.ReadAll(reader)
		if err != nil {
			t.Fatal(err)
		}
		if header.Typeflag != tar.TypeReg || header.Uid != 0 || header.Gid != 0 ||
			header.Mode != 0o644 || !header.ModTime.Equal(fixed) {
			t.Errorf("%s: type %c uid %d gid %d mode %o time %v; want a file, 0:0, 0644, %v",
				header.Name, header.Typeflag, header.Uid, header.Gid, header.Mode, header.ModTime, fixed)
		}
		packaged[header.Name] = string(content)
		order = append(order, header.Name)
	}
	if !sort.StringsAreSorted(order) {
		t.Errorf("entries are not in name order: %v", order)
	}

	source := map[string]string{}
	err = filepath.WalkDir(chartDir(t), func(p string, entry fs.DirEntry, err error) error {
		if err != nil || entry.IsDir() || strings.HasPrefix(entry.Name(), ".") {
			return err
		}
		rel, _ := filepath.Rel(filepath.Dir(chartDir(t)), p)
		source[filepath.ToSlash(rel)] = readFile(t, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(packaged, source) {
		for name := range source {
			if packaged[name] != source[name] {
				t.Errorf("%s differs from (or is missing in) the package: rebuild", name)
			}
		}
		for name := range packaged {
			if _, ok := source[name]; !ok {
				t.Errorf("%s is in the package but not in the chart", name)
			}
		}
	}
}

// The package renders exactly as the directory does.
func TestPackageRendersAsTheDirectory(t *testing.T) {
	file, data := packagedChart(t)
	archive, err := helmlite.LoadArchive(filepath.Base(file), data)
	if err != nil {
		t.Fatal(err)
	}
	directory := loadChart(t)
	for _, c := range matrix {
		got, want := render(t, archive, c), render(t, directory, c)
		if !reflect.DeepEqual(got.Manifests, want.Manifests) || got.Notes != want.Notes {
			t.Errorf("case %s: the package renders differently from charts/uplink-agent", c.name)
		}
	}
}
