# `cmake --install build --prefix P`: headers under P/include/pipetrain (the src/ layout), the
# static libraries, the `pipetrain` program and the SentencePiece module, and the CMake package
# P/lib/cmake/pipetrain (pipetrainConfig.cmake, exporting pipetrain::pipetrain).
set(PIPETRAIN_EXPORTED_LIBRARIES
  pipetrain_fmt pipetrain_torch pipetrain_c10d_gloo pipetrain_core pipetrain_io pipetrain_hf pipetrain_data pipetrain_schedule pipetrain_sim pipetrain_plan
  pipetrain_device pipetrain_loss_cuda pipetrain_loss pipetrain_model pipetrain_speech pipetrain_train pipetrain_runtime
  pipetrain_profile pipetrain_cli pipetrain_library)
install(TARGETS ${PIPETRAIN_EXPORTED_LIBRARIES} EXPORT pipetrainTargets
        ARCHIVE DESTINATION lib LIBRARY DESTINATION lib)
install(TARGETS pipetrain RUNTIME DESTINATION bin)
install(TARGETS pipetrain_sentencepiece LIBRARY DESTINATION lib)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/ DESTINATION include/pipetrain
        FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${PIPETRAIN_FMT_INCLUDE_DIR}/ DESTINATION include/pipetrain/fmt-include)
install(EXPORT pipetrainTargets NAMESPACE pipetrain:: DESTINATION lib/cmake/pipetrain)
configure_file(${CMAKE_CURRENT_LIST_DIR}/pipetrainConfig.cmake.in
               ${PROJECT_BINARY_DIR}/pipetrainConfig.cmake @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pipetrainConfig.cmake DESTINATION lib/cmake/pipetrain)
