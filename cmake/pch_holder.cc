// The translation unit of the targets that only hold the precompiled headers
// (cmake/precompiled_headers.cmake): it defines nothing.
