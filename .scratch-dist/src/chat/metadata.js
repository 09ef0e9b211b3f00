export {};
//# sourceMappingURL=metadata.js.map