/** Stylesheets are bundled by esbuild (src/dashboard/build.ts); importing one has no value. */
declare module '*.css';
